//! TCP stream reassembly for one direction of a connection, by sequence number (RFC 9293
//! section 3.4, with modular arithmetic): in-order data is passed on at once,
//! retransmitted and overlapping data is trimmed, out-of-order segments wait, and data
//! that never shows up (capture loss, snap length) becomes an explicit gap.
//!
//! Knows nothing of BGP. Holds a bounded amount of out-of-order data per direction.

/// Out-of-order data held per direction before giving up on the missing part.
const MAX_PENDING_BYTES: usize = 1 << 20;
const MAX_PENDING_SEGMENTS: usize = 4096;

/// What reassembly hands on, in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    Data(Vec<u8>),
    /// This many stream octets are missing from the capture.
    Gap(u64),
    /// A segment repeated the sequence number of the last one with different data:
    /// not a retransmission but a new stream reusing the numbers (test captures made of
    /// independent packets, or injected data). What follows starts afresh.
    Restart,
}

#[derive(Debug, Default)]
pub struct Direction {
    /// The sequence number of the next octet expected; `None` before the first segment.
    next: Option<u32>,
    /// Segments ahead of `next`: (sequence number, captured data, octets missing after
    /// the captured data).
    pending: Vec<(u32, Vec<u8>, usize)>,
    pending_bytes: usize,
    /// A SYN that carried data: (ISN, octets). See [`Direction::syn_with_data`].
    syn_data: Option<(u32, usize)>,
    /// The last segment delivered in order, to tell a retransmission from a conflict.
    last: Option<(u32, Vec<u8>)>,
}

/// Signed distance from `from` to `to` in sequence space.
fn distance(from: u32, to: u32) -> i64 {
    i64::from(to.wrapping_sub(from) as i32)
}

impl Direction {
    /// A SYN starts the stream afresh: its sequence number is the ISN, data starts one
    /// after it. Anything held from an earlier connection on the same ports is dropped.
    pub fn syn(&mut self, isn: u32) {
        self.next = Some(isn.wrapping_add(1));
        self.pending.clear();
        self.pending_bytes = 0;
        self.syn_data = None;
        self.last = None;
    }

    /// A SYN carrying data: the data is numbered from ISN + 1 (RFC 9293 section 3.4).
    /// Capture generators that put data on a SYN sometimes number it from the ISN
    /// instead; when the next segment starts exactly one octet early, the stream is
    /// renumbered to match rather than losing an octet to "retransmission" trimming.
    pub fn syn_with_data(&mut self, isn: u32, data: &[u8], missing: usize, out: &mut Vec<Chunk>) {
        self.syn(isn);
        if data.is_empty() && missing == 0 {
            return;
        }
        self.segment(isn.wrapping_add(1), data, missing, out);
        self.syn_data = Some((isn, data.len() + missing));
    }

    /// Whether a stream has started (a SYN or data has been seen).
    pub fn started(&self) -> bool {
        self.next.is_some()
    }

    /// Takes one segment: `data` as captured, `missing` octets that were on the wire
    /// after it but not captured. Pushes whatever becomes in-order onto `out`.
    pub fn segment(&mut self, seq: u32, data: &[u8], missing: usize, out: &mut Vec<Chunk>) {
        if data.is_empty() && missing == 0 {
            return;
        }
        if let Some((isn, len)) = self.syn_data.take() {
            let renumbered = isn.wrapping_add(len as u32);
            if seq == renumbered && self.next == Some(renumbered.wrapping_add(1)) {
                self.next = Some(renumbered);
            }
        }
        if let Some((last_seq, last_data)) = &self.last {
            if *last_seq == seq && !data.is_empty() && data != &last_data[..] {
                out.push(Chunk::Restart);
                self.next = Some(seq);
                self.pending.clear();
                self.pending_bytes = 0;
            }
        }
        // Joining mid-stream: the first segment seen defines the start.
        let next = *self.next.get_or_insert(seq);
        let ahead = distance(next, seq);
        if ahead > 0 {
            if self
                .pending
                .iter()
                .any(|(s, d, m)| *s == seq && d.len() + m >= data.len() + missing)
            {
                return;
            }
            self.pending_bytes += data.len();
            self.pending.push((seq, data.to_vec(), missing));
            if self.pending_bytes > MAX_PENDING_BYTES || self.pending.len() > MAX_PENDING_SEGMENTS {
                self.skip_to_earliest(out);
            }
            return;
        }
        if ahead == 0 && !data.is_empty() {
            self.last = Some((seq, data.to_vec()));
        }
        self.deliver(seq, data, missing, out);
        self.drain(out);
    }

    /// Ends the stream: whatever is still held is delivered with gaps for the holes.
    pub fn finish(&mut self, out: &mut Vec<Chunk>) {
        while !self.pending.is_empty() {
            self.skip_to_earliest(out);
        }
    }

    /// Delivers a segment that starts at or before `next`, trimming what was delivered
    /// already (a retransmission or an overlap).
    fn deliver(&mut self, seq: u32, data: &[u8], missing: usize, out: &mut Vec<Chunk>) {
        let Some(next) = self.next else { return };
        let behind = usize::try_from(-distance(next, seq)).unwrap_or(0);
        let total = data.len() + missing;
        if behind >= total {
            return;
        }
        let mut advanced = 0usize;
        if behind < data.len() {
            out.push(Chunk::Data(data[behind..].to_vec()));
            advanced += data.len() - behind;
        }
        let missing_now = total - behind - advanced;
        if missing_now > 0 {
            out.push(Chunk::Gap(missing_now as u64));
            advanced += missing_now;
        }
        self.next = Some(next.wrapping_add(advanced as u32));
    }

    /// Delivers every held segment that has become in order.
    fn drain(&mut self, out: &mut Vec<Chunk>) {
        while let Some(next) = self.next {
            let Some(i) = self
                .pending
                .iter()
                .position(|(s, _, _)| distance(next, *s) <= 0)
            else {
                break;
            };
            let (seq, data, missing) = self.pending.swap_remove(i);
            self.pending_bytes -= data.len();
            self.deliver(seq, &data, missing, out);
        }
    }

    /// Gives up on the hole before the earliest held segment.
    fn skip_to_earliest(&mut self, out: &mut Vec<Chunk>) {
        let Some(next) = self.next else { return };
        let Some(earliest) = self
            .pending
            .iter()
            .map(|(s, _, _)| *s)
            .min_by_key(|s| distance(next, *s))
        else {
            return;
        };
        let hole = distance(next, earliest);
        if hole > 0 {
            out.push(Chunk::Gap(hole as u64));
            self.next = Some(earliest);
        }
        self.drain(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(chunks: &[Chunk]) -> Vec<u8> {
        chunks
            .iter()
            .flat_map(|c| {
                if let Chunk::Data(d) = c {
                    d.clone()
                } else {
                    vec![]
                }
            })
            .collect()
    }

    #[test]
    fn in_order_after_syn() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(1000);
        d.segment(1001, b"hello ", 0, &mut out);
        d.segment(1007, b"world", 0, &mut out);
        assert_eq!(
            out,
            vec![
                Chunk::Data(b"hello ".to_vec()),
                Chunk::Data(b"world".to_vec())
            ]
        );
    }

    #[test]
    fn retransmission_and_overlap_are_trimmed() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(0);
        d.segment(1, b"abcd", 0, &mut out);
        d.segment(1, b"abcd", 0, &mut out); // retransmitted
        d.segment(3, b"cdef", 0, &mut out); // overlaps by two
        d.segment(6, b"f", 0, &mut out); // keepalive-probe style old octet
        assert_eq!(data(&out), b"abcdef");
        assert!(out.iter().all(|c| matches!(c, Chunk::Data(_))));
    }

    #[test]
    fn out_of_order_waits_for_the_hole() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(10);
        d.segment(16, b"fgh", 0, &mut out);
        d.segment(19, b"ij", 0, &mut out);
        assert!(out.is_empty());
        d.segment(11, b"abcde", 0, &mut out);
        assert_eq!(data(&out), b"abcdefghij");
    }

    #[test]
    fn wraps_around_the_sequence_space() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(u32::MAX - 2);
        d.segment(u32::MAX - 1, b"ab", 0, &mut out);
        d.segment(1, b"de", 0, &mut out);
        d.segment(0, b"c", 0, &mut out);
        assert_eq!(data(&out), b"abcde");
    }

    #[test]
    fn lost_data_becomes_a_gap_at_the_end() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.segment(500, b"abc", 0, &mut out); // joined mid-stream
        d.segment(510, b"xyz", 0, &mut out);
        d.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Chunk::Data(b"abc".to_vec()),
                Chunk::Gap(7),
                Chunk::Data(b"xyz".to_vec())
            ]
        );
    }

    #[test]
    fn snapped_segment_leaves_a_gap_of_its_missing_tail() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(0);
        d.segment(1, b"ab", 3, &mut out);
        d.segment(6, b"f", 0, &mut out);
        assert_eq!(
            out,
            vec![
                Chunk::Data(b"ab".to_vec()),
                Chunk::Gap(3),
                Chunk::Data(b"f".to_vec())
            ]
        );
    }

    #[test]
    fn too_much_pending_data_skips_the_hole() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(0);
        let block = vec![0x55; 1000];
        for i in 0..(MAX_PENDING_BYTES / 1000 + 1) {
            d.segment(101 + (i * 1000) as u32, &block, 0, &mut out);
        }
        assert_eq!(out.first(), Some(&Chunk::Gap(100)));
        assert_eq!(data(&out).len(), (MAX_PENDING_BYTES / 1000 + 1) * 1000);
    }

    #[test]
    fn data_on_a_syn_starts_after_the_isn() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn_with_data(100, b"abc", 0, &mut out);
        d.segment(104, b"def", 0, &mut out);
        d.segment(104, b"def", 0, &mut out);
        assert_eq!(data(&out), b"abcdef");
    }

    #[test]
    fn data_on_a_syn_numbered_from_the_isn_is_renumbered() {
        // As in the pmacct test captures: the SYN's data at 100..103, the next at 103.
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn_with_data(100, b"abc", 0, &mut out);
        d.segment(103, b"def", 0, &mut out);
        d.segment(106, b"g", 0, &mut out);
        assert_eq!(data(&out), b"abcdefg");
    }

    #[test]
    fn same_sequence_number_with_other_data_restarts() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.segment(7, b"first", 0, &mut out);
        d.segment(7, b"first", 0, &mut out); // a true retransmission
        d.segment(7, b"other!", 0, &mut out);
        assert_eq!(
            out,
            vec![
                Chunk::Data(b"first".to_vec()),
                Chunk::Restart,
                Chunk::Data(b"other!".to_vec())
            ]
        );
    }

    #[test]
    fn a_new_syn_forgets_the_old_stream() {
        let mut d = Direction::default();
        let mut out = Vec::new();
        d.syn(0);
        d.segment(50, b"stale", 0, &mut out);
        d.syn(9000);
        d.segment(9001, b"fresh", 0, &mut out);
        d.finish(&mut out);
        assert_eq!(out, vec![Chunk::Data(b"fresh".to_vec())]);
    }
}
