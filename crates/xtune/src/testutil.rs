//! Helpers for unit tests: a fake `/proc` + `/sys` tree to point an
//! [`crate::fs::RootFs`] at, in a testkit [`TempDir`].

pub(crate) use xload_testkit::TempDir;

/// A fake host with `cpus` online CPUs, the given sysctls, and devices with
/// `(name, rx_queues, tx_queues)`.
pub(crate) fn fake_host(
    tag: &str,
    cpus: u32,
    sysctls: &[(&str, &str)],
    devices: &[(&str, u32, u32)],
) -> TempDir {
    let t = TempDir::new(tag);
    let list = if cpus == 1 {
        "0".to_string()
    } else {
        format!("0-{}", cpus - 1)
    };
    t.put("/sys/devices/system/cpu/online", &format!("{list}\n"));
    t.put("/sys/devices/system/cpu/possible", &format!("{list}\n"));
    t.put("/sys/devices/system/cpu/isolated", "\n");
    t.put("/sys/devices/system/cpu/offline", "\n");
    t.mkdir("/proc");
    t.mkdir("/etc/sysctl.d");
    for (k, v) in sysctls {
        t.put(
            &format!("/proc/sys/{}", k.replace('.', "/")),
            &format!("{v}\n"),
        );
    }
    for (dev, rx, tx) in devices {
        let base = format!("/sys/class/net/{dev}");
        t.put(&format!("{base}/tx_queue_len"), "1000\n");
        for q in 0..*rx {
            t.put(&format!("{base}/queues/rx-{q}/rps_cpus"), "0\n");
            t.put(&format!("{base}/queues/rx-{q}/rps_flow_cnt"), "0\n");
        }
        for q in 0..*tx {
            t.put(&format!("{base}/queues/tx-{q}/xps_cpus"), "0\n");
        }
    }
    t
}
