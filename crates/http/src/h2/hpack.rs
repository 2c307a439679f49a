//! HPACK (RFC 7541): a decoder for response header blocks and the encoder
//! pieces that render a request's header block once.
//!
//! The decoder keeps its dynamic table's bytes in one buffer reserved to
//! twice the table's size up front, so decoding allocates nothing once the
//! two scratch buffers (for Huffman strings and literal names) have grown to
//! the largest field seen. Indexed fields are handed out as slices of the
//! table, plain literals as slices of the block itself.

use std::collections::VecDeque;

use super::tables::{HUFFMAN_CODES, STATIC_TABLE};

/// Why a header block cannot be decoded. Each is a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HpackError {
    /// The block ends inside a field representation.
    #[error("header block ends inside a field")]
    Truncated,
    /// An integer with more than four continuation bytes.
    #[error("HPACK integer too long")]
    IntegerOverflow,
    /// Index 0, which names no entry.
    #[error("HPACK index 0")]
    ZeroIndex,
    /// An index past the static and dynamic tables.
    #[error("HPACK index past the end of the tables")]
    BadIndex,
    /// A dynamic table size update above the SETTINGS_HEADER_TABLE_SIZE the decoder allows.
    #[error("dynamic table size update above the allowed maximum")]
    SizeUpdateTooLarge,
    /// A dynamic table size update after the first field of a block.
    #[error("dynamic table size update after a header field")]
    LateSizeUpdate,
    /// A block that ends with a dynamic table size update (no field follows;
    /// refused as loona-hpack does).
    #[error("header block ends with a dynamic table size update")]
    SizeUpdateAtEnd,
    /// A Huffman string containing the EOS symbol.
    #[error("Huffman string contains EOS")]
    HuffmanEos,
    /// A Huffman string whose padding is longer than 7 bits or not all ones.
    #[error("invalid Huffman padding")]
    HuffmanPadding,
}

// ---------------------------------------------------------------------------
// Huffman

/// Canonical decoding tables derived from [`HUFFMAN_CODES`] at compile time:
/// the code is canonical (codes of one length are consecutive, in symbol
/// order), so a code of length `l` is the symbol
/// `SORTED[OFFSET[l] + code - FIRST[l]]` when `code - FIRST[l] < COUNT[l]`.
struct Canonical {
    first: [u32; 32],
    count: [u32; 32],
    offset: [u16; 32],
    sorted: [u16; 257],
}

const CANONICAL: Canonical = build_canonical();

const fn build_canonical() -> Canonical {
    let mut c = Canonical {
        first: [0; 32],
        count: [0; 32],
        offset: [0; 32],
        sorted: [0; 257],
    };
    let mut n = 0;
    let mut len = 1;
    while len < 32 {
        c.offset[len] = n as u16;
        let mut first_set = false;
        let mut sym = 0;
        while sym < 257 {
            let (code, l) = HUFFMAN_CODES[sym];
            if l as usize == len {
                if !first_set {
                    c.first[len] = code;
                    first_set = true;
                }
                c.count[len] += 1;
                c.sorted[n] = sym as u16;
                n += 1;
            }
            sym += 1;
        }
        len += 1;
    }
    c
}

/// For each length `l`, one past the largest code of length `l` or less,
/// left-justified to 30 bits: a 30-bit window below `LIMIT[l]` starts with
/// a code of length `l` or less.
const LIMIT: [u32; 31] = build_limits();

const fn build_limits() -> [u32; 31] {
    let c = &CANONICAL;
    let mut limit = [0u32; 31];
    let mut len = 1;
    while len <= 30 {
        limit[len] = if c.count[len] == 0 {
            limit[len - 1]
        } else {
            (c.first[len] + c.count[len]) << (30 - len)
        };
        len += 1;
    }
    limit
}

/// Appends the Huffman decoding of `src` to `dst`: a symbol per step, its
/// length found from the next 30 bits against [`LIMIT`].
pub(crate) fn huffman_decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    const MASK30: u64 = (1 << 30) - 1;
    let c = &CANONICAL;
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut i = 0;
    loop {
        while bits <= 56 && i < src.len() {
            acc = (acc << 8) | u64::from(src[i]);
            bits += 8;
            i += 1;
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 30 bits, padded with ones past the end.
        let w = if bits >= 30 {
            (acc >> (bits - 30)) & MASK30
        } else {
            ((acc << (30 - bits)) | ((1 << (30 - bits)) - 1)) & MASK30
        } as u32;
        let mut len = 5;
        while w >= LIMIT[len] {
            len += 1; // ends at 30 at the latest: LIMIT[30] is 2^30
        }
        if len as u32 > bits {
            // No whole symbol left: the rest is padding, at most 7 bits, all ones.
            if bits > 7 || acc != (1 << bits) - 1 {
                return Err(HpackError::HuffmanPadding);
            }
            return Ok(());
        }
        let code = w >> (30 - len);
        let sym = c.sorted[usize::from(c.offset[len]) + (code - c.first[len]) as usize];
        if sym == 256 {
            return Err(HpackError::HuffmanEos);
        }
        dst.push(sym as u8);
        bits -= len as u32;
        acc &= (1 << bits) - 1;
    }
}

/// Appends the Huffman encoding of `src` to `dst` (tests and fuzzing build
/// blocks with it; requests are sent as plain literals).
pub fn huffman_encode(src: &[u8], dst: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0;
    for &b in src {
        let (code, len) = HUFFMAN_CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        dst.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}

// ---------------------------------------------------------------------------
// Integers and strings

/// Decodes an integer with an `n`-bit prefix from `buf[*pos..]`.
fn decode_int(buf: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    let mask = (1usize << n) - 1;
    let first = *buf.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    // At most four continuation bytes (values below 2^28 + 2^8): longer
    // encodings are refused, as loona-hpack and nghttp2 do.
    for shift in [0, 7, 14, 21] {
        let b = *buf.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HpackError::IntegerOverflow)
}

/// Appends an integer with an `n`-bit prefix; `first` holds the pattern bits above the prefix.
pub fn encode_int(value: usize, n: u32, first: u8, dst: &mut Vec<u8>) {
    let mask = (1usize << n) - 1;
    if value < mask {
        dst.push(first | value as u8);
        return;
    }
    dst.push(first | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        dst.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Appends a string literal without Huffman coding.
pub fn encode_str(s: &[u8], dst: &mut Vec<u8>) {
    encode_int(s.len(), 7, 0, dst);
    dst.extend_from_slice(s);
}

/// Where a decoded string is: in the block, or in a scratch buffer.
enum Str {
    Block(usize, usize),
    Scratch,
}

/// Reads a string literal at `buf[*pos..]`; Huffman strings are decoded into `scratch`.
fn decode_str(buf: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, HpackError> {
    let (huffman, a, z) = read_str(buf, pos)?;
    if huffman {
        scratch.clear();
        huffman_decode(&buf[a..z], scratch)?;
        Ok(Str::Scratch)
    } else {
        Ok(Str::Block(a, z))
    }
}

/// Reads a string literal's header at `buf[*pos..]`: whether it is Huffman
/// coded, and where its bytes are in `buf`.
#[inline]
fn read_str(buf: &[u8], pos: &mut usize) -> Result<(bool, usize, usize), HpackError> {
    let huffman = buf.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(buf, pos, 7)?;
    let start = *pos;
    if buf.len() - start < len {
        return Err(HpackError::Truncated);
    }
    *pos += len;
    Ok((huffman, start, start + len))
}

/// Huffman-coded literal values by their place in the block (the first
/// [`MEMO_SLOTS`]): a server that sends the same fields in the same order
/// without indexing them (nginx: `server`, `date`, `content-type` on every
/// response) costs a comparison, not a decode.
const MEMO_SLOTS: usize = 8;

struct Memo {
    /// The coded bytes of the value last decoded in this slot (empty: none).
    coded: Vec<u8>,
    decoded: Vec<u8>,
}

/// The decoding of the Huffman-coded `coded`, the block's value number
/// `slot`: remembered in `memo[slot]`, or decoded into `scratch` past the
/// memo's slots.
#[inline]
fn huffman_value<'a>(
    memo: &'a mut [Memo],
    slot: usize,
    coded: &[u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], HpackError> {
    let Some(m) = memo.get_mut(slot) else {
        scratch.clear();
        huffman_decode(coded, scratch)?;
        return Ok(scratch);
    };
    if m.coded.is_empty() || m.coded != coded {
        m.coded.clear();
        m.decoded.clear();
        if let Err(e) = huffman_decode(coded, &mut m.decoded) {
            m.decoded.clear();
            return Err(e);
        }
        m.coded.extend_from_slice(coded);
    }
    Ok(&m.decoded)
}

// ---------------------------------------------------------------------------
// Dynamic table

/// Size overhead of each dynamic table entry (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

#[derive(Clone, Copy)]
struct Entry {
    /// Offset of the name in the stream of all bytes ever inserted.
    start: u64,
    name_len: u32,
    value_len: u32,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len as usize + self.value_len as usize + ENTRY_OVERHEAD
    }
}

/// The dynamic table: entries oldest first, each one's name and value
/// contiguous in one buffer (so a lookup hands out slices, no copy).
/// Evicting only moves a mark; the evicted bytes are dropped from the
/// front when an insert would outgrow the buffer (reserved to twice the
/// table's size: amortized, one move per table's worth of inserts).
struct DynamicTable {
    /// Bytes from stream offset `base` on (the live ones from `evicted`).
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
    /// Stream offset of `bytes[0]`.
    base: u64,
    /// Bytes ever evicted: the oldest live entry starts here.
    evicted: u64,
    size: usize,
    max: usize,
}

impl DynamicTable {
    fn new(max: usize) -> Self {
        DynamicTable {
            bytes: Vec::with_capacity(2 * max),
            entries: VecDeque::with_capacity(max / ENTRY_OVERHEAD),
            base: 0,
            evicted: 0,
            size: 0,
            max,
        }
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let e = self.entries.pop_front().expect("size > 0 means entries");
            self.evicted += u64::from(e.name_len) + u64::from(e.value_len);
            self.size -= e.size();
        }
    }

    fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - size);
        let n = name.len() + value.len();
        if self.bytes.len() + n > self.bytes.capacity() && self.evicted > self.base {
            // Drop the evicted bytes rather than grow.
            self.bytes.drain(..(self.evicted - self.base) as usize);
            self.base = self.evicted;
        }
        self.entries.push_back(Entry {
            start: self.base + self.bytes.len() as u64,
            name_len: name.len() as u32,
            value_len: value.len() as u32,
        });
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.size += size;
    }

    /// Entry `i` (0 = newest): its name and value.
    #[inline]
    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let k = self.entries.len().checked_sub(i + 1)?;
        let e = self.entries[k];
        let at = (e.start - self.base) as usize;
        let mid = at + e.name_len as usize;
        Some((
            &self.bytes[at..mid],
            &self.bytes[mid..mid + e.value_len as usize],
        ))
    }
}

// ---------------------------------------------------------------------------
// Decoder

/// HPACK decoder for one connection's response header blocks.
pub struct Decoder {
    table: DynamicTable,
    /// The largest table size the decoder accepts in a size update (our SETTINGS_HEADER_TABLE_SIZE).
    allowed: usize,
    name: Vec<u8>,
    value: Vec<u8>,
    memo: [Memo; MEMO_SLOTS],
}

impl Decoder {
    /// A decoder whose dynamic table may grow to `max_table_size` bytes.
    pub fn new(max_table_size: usize) -> Self {
        Decoder {
            table: DynamicTable::new(max_table_size),
            allowed: max_table_size,
            name: Vec::with_capacity(64),
            value: Vec::with_capacity(256),
            memo: std::array::from_fn(|_| Memo {
                coded: Vec::with_capacity(48),
                decoded: Vec::with_capacity(64),
            }),
        }
    }

    /// Changes the size the encoder may use (after our SETTINGS was acknowledged).
    pub fn set_allowed(&mut self, max: usize) {
        self.allowed = max;
        if self.table.max > max {
            self.table.set_max(max);
        }
    }

    /// The dynamic table's current size and maximum, in RFC 7541 units.
    pub fn table_size(&self) -> (usize, usize) {
        (self.table.size, self.table.max)
    }

    /// Decodes one whole header block, calling `field(name, value)` for each
    /// field in order. On error the connection is unusable (the table may be
    /// out of step with the encoder's).
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let Decoder {
            table,
            allowed,
            name,
            value,
            memo,
        } = self;
        let mut pos = 0;
        // Huffman-coded values so far (their memo slot).
        let mut coded_values = 0;
        let mut seen_field = false;
        let mut last_was_update = false;
        while pos < block.len() {
            last_was_update = false;
            let b = block[pos];
            if b & 0x80 != 0 {
                // Indexed field.
                let index = decode_int(block, &mut pos, 7)?;
                match index {
                    0 => return Err(HpackError::ZeroIndex),
                    1..=61 => {
                        let (n, v) = STATIC_TABLE[index - 1];
                        field(n, v);
                    }
                    _ => {
                        let (n, v) = table.get(index - 62).ok_or(HpackError::BadIndex)?;
                        field(n, v);
                    }
                }
                seen_field = true;
                continue;
            }
            if b & 0xe0 == 0x20 {
                // Dynamic table size update.
                if seen_field {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = decode_int(block, &mut pos, 5)?;
                if size > *allowed {
                    return Err(HpackError::SizeUpdateTooLarge);
                }
                table.set_max(size);
                last_was_update = true;
                continue;
            }
            // Literal: with incremental indexing (01), without (0000) or never indexed (0001).
            let indexing = b & 0xc0 == 0x40;
            let prefix = if indexing { 6 } else { 4 };
            let index = decode_int(block, &mut pos, prefix)?;
            // The name: static (borrowed), or copied into `name`.
            let static_name: Option<&'static [u8]> = match index {
                0 => {
                    match decode_str(block, &mut pos, name)? {
                        Str::Block(a, z) => {
                            name.clear();
                            name.extend_from_slice(&block[a..z]);
                        }
                        Str::Scratch => {}
                    }
                    None
                }
                1..=61 => Some(STATIC_TABLE[index - 1].0),
                _ => {
                    // Copied: the insert below may move the table's bytes.
                    let (n, _) = table.get(index - 62).ok_or(HpackError::BadIndex)?;
                    name.clear();
                    name.extend_from_slice(n);
                    None
                }
            };
            let n: &[u8] = static_name.unwrap_or(name);
            let v: &[u8] = match read_str(block, &mut pos)? {
                (false, a, z) => &block[a..z],
                (true, a, z) => {
                    coded_values += 1;
                    huffman_value(memo, coded_values - 1, &block[a..z], value)?
                }
            };
            field(n, v);
            if indexing {
                table.insert(n, v);
            }
            seen_field = true;
        }
        if last_was_update {
            return Err(HpackError::SizeUpdateAtEnd);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Encoder pieces

/// Static table index of the first entry named `name` (lower case), if any.
pub fn static_name_index(name: &[u8]) -> Option<usize> {
    STATIC_TABLE
        .iter()
        .position(|(n, _)| *n == name)
        .map(|i| i + 1)
}

/// Static table index of the entry `name: value`, if any.
pub fn static_index(name: &[u8], value: &[u8]) -> Option<usize> {
    STATIC_TABLE
        .iter()
        .position(|(n, v)| *n == name && *v == value)
        .map(|i| i + 1)
}

/// Appends `name: value` as the static entry's index, or as a literal
/// without indexing (name by static index when there is one). Nothing
/// enters the server's dynamic table, so its SETTINGS_HEADER_TABLE_SIZE
/// never matters.
pub fn encode_field(name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    if let Some(i) = static_index(name, value) {
        encode_int(i, 7, 0x80, dst);
    } else if let Some(i) = static_name_index(name) {
        encode_int(i, 4, 0x00, dst);
        encode_str(value, dst);
    } else {
        dst.push(0x00);
        encode_str(name, dst);
        encode_str(value, dst);
    }
}
