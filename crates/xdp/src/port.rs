//! One AF_XDP socket's frames for a user-space stack: half the UMEM feeds
//! the fill ring, half is free for transmit; received frames are read in
//! batches straight from the UMEM and go back to the fill ring at the next
//! [`FramePort::flush`], which also publishes what was written for
//! transmit (and kicks the kernel: in copy mode `sendto` does the sending)
//! and takes completed frames back.

use crate::xsk::{XdpDesc, XdpStatistics, XskSocket};

/// Receive entries taken per ring read.
const BATCH: u32 = 64;

/// A socket and the ownership of its UMEM frames.
#[derive(Debug)]
pub struct FramePort {
    pub xsk: XskSocket,
    /// UMEM frames free for transmit.
    free: Vec<u64>,
    /// Received frames read and due back to the fill ring.
    recycle: Vec<u64>,
    /// Receive entries of the current batch: ready, and read so far.
    rx_ready: u32,
    rx_taken: u32,
    /// Transmit descriptors written but not yet published.
    tx_written: u32,
    pub rx_frames: u64,
    pub tx_frames: u64,
}

impl FramePort {
    /// Takes over `xsk` (it needs RX and TX rings): gives the first half of
    /// its UMEM frames to the fill ring.
    pub fn new(mut xsk: XskSocket) -> FramePort {
        let (size, count) = (xsk.umem.frame_size, xsk.umem.frame_count);
        let half = count / 2;
        let n = xsk.fill.free(half).min(half);
        for i in 0..n {
            xsk.fill.write(i, u64::from(i) * u64::from(size));
        }
        xsk.fill.submit(n);
        FramePort {
            free: (n..count).map(|i| u64::from(i) * u64::from(size)).collect(),
            recycle: Vec::with_capacity(count as usize),
            xsk,
            rx_ready: 0,
            rx_taken: 0,
            tx_written: 0,
            rx_frames: 0,
            tx_frames: 0,
        }
    }

    /// Hands the next received frame to `f`; false when none is waiting.
    pub fn rx_one(&mut self, f: impl FnOnce(&[u8])) -> bool {
        let Some(rx) = self.xsk.rx.as_mut() else {
            return false;
        };
        if self.rx_taken == self.rx_ready {
            rx.release(self.rx_taken);
            self.rx_taken = 0;
            self.rx_ready = rx.ready(BATCH);
            if self.rx_ready == 0 {
                return false;
            }
        }
        let Some(d) = rx.read(self.rx_taken) else {
            return false;
        };
        self.rx_taken += 1;
        if let Some(frame) = self.xsk.umem.frame(d.addr, d.len as usize) {
            f(frame);
        }
        let size = u64::from(self.xsk.umem.frame_size);
        self.recycle.push(d.addr - d.addr % size);
        self.rx_frames += 1;
        true
    }

    /// Hands every waiting frame to `f`; returns how many there were.
    pub fn rx_each(&mut self, mut f: impl FnMut(&[u8])) -> u32 {
        let mut n = 0;
        while self.rx_one(&mut f) {
            n += 1;
        }
        n
    }

    /// Whether [`FramePort::tx_one`] has a free frame and ring slot.
    pub fn tx_room(&mut self) -> bool {
        if self.free.is_empty() {
            self.reclaim();
        }
        let Some(tx) = self.xsk.tx.as_mut() else {
            return false;
        };
        !self.free.is_empty() && tx.free(self.tx_written + 1) > self.tx_written
    }

    /// Lets `f` write one frame (up to a UMEM frame's size) into a free
    /// frame; false when none is free or `f` wrote nothing.
    pub fn tx_one(&mut self, f: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        if !self.tx_room() {
            return false;
        }
        let Some(&addr) = self.free.last() else {
            return false;
        };
        let size = self.xsk.umem.frame_size as usize;
        let Some(buf) = self.xsk.umem.frame_mut(addr, size) else {
            return false;
        };
        let Some(len) = f(buf) else { return false };
        let Some(tx) = self.xsk.tx.as_mut() else {
            return false;
        };
        let desc = XdpDesc {
            addr,
            len: len.min(size) as u32,
            options: 0,
        };
        if !tx.write(self.tx_written, desc) {
            return false;
        }
        self.free.pop();
        self.tx_written += 1;
        self.tx_frames += 1;
        true
    }

    /// Publishes transmit descriptors (kicking the kernel when it asks),
    /// gives read frames back to the fill ring, takes completed ones back.
    pub fn flush(&mut self) {
        if let Some(rx) = self.xsk.rx.as_mut() {
            if self.rx_taken > 0 {
                rx.release(self.rx_taken);
                self.rx_ready -= self.rx_taken;
                self.rx_taken = 0;
            }
        }
        if !self.recycle.is_empty() {
            let want = self.recycle.len() as u32;
            let fill = &mut self.xsk.fill;
            let n = fill.free(want).min(want);
            for i in 0..n {
                fill.write(i, self.recycle[i as usize]);
            }
            fill.submit(n);
            self.recycle.drain(..n as usize);
            if fill.needs_wakeup() {
                let _ = self.xsk.kick_rx();
            }
        }
        if self.tx_written > 0 {
            if let Some(tx) = self.xsk.tx.as_mut() {
                tx.submit(self.tx_written);
                self.tx_written = 0;
                if tx.needs_wakeup() {
                    let _ = self.xsk.kick_tx();
                }
            }
        }
        self.reclaim();
    }

    fn reclaim(&mut self) {
        let comp = &mut self.xsk.comp;
        let n = comp.ready(comp.size());
        for i in 0..n {
            if let Some(addr) = comp.read(i) {
                self.free.push(addr);
            }
        }
        comp.release(n);
    }

    /// Waits up to `timeout_ms` for a received frame.
    pub fn wait(&self, timeout_ms: i32) {
        let _ = self.xsk.poll_rx(timeout_ms);
    }

    /// `XDP_STATISTICS` of the socket.
    pub fn statistics(&self) -> std::io::Result<XdpStatistics> {
        self.xsk.statistics()
    }
}
