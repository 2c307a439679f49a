# xload and xtune on a slim Debian image.
#
#   docker build -t xload .
#   docker run --rm --network host --security-opt seccomp=unconfined xload demo
#
# Docker's default seccomp profile blocks io_uring: without
# `--security-opt seccomp=unconfined` (or a profile that allows io_uring_setup,
# io_uring_enter and io_uring_register) runs use the epoll engine and
# `xload serve` / `xload demo` cannot start. See the README, "Containers".

# Build stage: the release binaries, from the locked dependency versions.
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p xload -p xtune

# Runtime stage: the two binaries and the font --plot draws its text with.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/xload /src/target/release/xtune /usr/local/bin/
COPY tuning /usr/local/share/xload/tuning
ENTRYPOINT ["xload"]
CMD ["--help"]
