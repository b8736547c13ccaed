//! The coupling of a BFD session to the session it protects (RFC 5882): when a BFD
//! failure (section 3.2: Up to Down, not the remote's AdminDown) must take the BGP
//! session down. Pure, like the rest of `bfd`: the peer task feeds it the BFD session's
//! failure count and whether the BGP session is Established, and carries out the verdict
//! (Cease/BFD Down, RFC 9384).
//!
//! - A failure counted before the coupling began (a BGP reset under a BFD session that
//!   goes on) is not this session's.
//! - A session that is not Established is left alone: BGP may come up before BFD
//!   (RFC 5882 section 4.2), and a BFD session that never came Up never fails.
//! - Each failure is acted on once; a burst counted together tears down once.

/// See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coupling {
    /// The failures already acted on (or counted before the coupling began).
    seen: u64,
}

/// What a new BFD status means for the protected session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No new failure.
    Nothing,
    /// A new failure, and the session is not Established: nothing to tear down.
    NotEstablished,
    /// A new failure of an Established session: stop it with Cease/BFD Down.
    TearDown,
}

impl Coupling {
    /// Begins with the failures the BFD session has counted so far.
    pub fn new(failures_so_far: u64) -> Coupling {
        Coupling {
            seen: failures_so_far,
        }
    }

    /// A new BFD status: `failures` counted in all, `established` the protected session.
    pub fn status(&mut self, failures: u64, established: bool) -> Verdict {
        if failures <= self.seen {
            return Verdict::Nothing;
        }
        self.seen = failures;
        if established {
            Verdict::TearDown
        } else {
            Verdict::NotEstablished
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_new_failure_once_and_only_on_an_established_session() {
        // Two failures before this BGP session began: not its own.
        let mut c = Coupling::new(2);
        assert_eq!(c.status(2, true), Verdict::Nothing);
        assert_eq!(c.status(3, true), Verdict::TearDown);
        assert_eq!(c.status(3, false), Verdict::Nothing);
        // BGP not (yet) up: seen, nothing torn down, not acted on again later.
        assert_eq!(c.status(4, false), Verdict::NotEstablished);
        assert_eq!(c.status(4, true), Verdict::Nothing);
        // A burst counted together: one tear-down.
        assert_eq!(c.status(7, true), Verdict::TearDown);
        assert_eq!(c.status(7, true), Verdict::Nothing);
    }
}
