//! The BGP session state machine (RFC 4271 section 8), sans-IO: it consumes [`Input`]s
//! stamped with the time they happened at and produces [`Action`]s and deadlines. It
//! never touches a socket, a clock, a task or the codec's bytes, and it does not own the
//! routes: it owns the protocol around them.
//!
//! # The driver's side of the contract
//!
//! ```text
//! loop {
//!     session.handle(now, input);          // an event, or Input::Timeout once
//!                                          // poll_timeout() has passed
//!     while let Some(a) = session.poll_action() { act on a }
//!     sleep until session.poll_timeout() or the next event
//! }
//! ```
//!
//! * Connections. [`Action::Connect`] asks for a dial (dropping any pending one);
//!   [`Input::TcpConnected`] reports it, or a connection the peer opened. In Connect or
//!   Active the session adopts it (the driver drops any other pending dial), and so it
//!   does with the peer's connection while waiting in Idle to retry
//!   ([`Session::accepts`]); otherwise it answers [`Action::RejectConnection`]. [`Action::CloseConnection`] ends the session's
//!   own connection (after flushing a NOTIFICATION when `notify`).
//! * Collisions (section 6.8): one `Session` per connection. When a connection arrives
//!   while the long-lived session is past Active, the driver starts a second session on
//!   it ([`Session::inbound`]) and, after each `handle` on either, asks
//!   [`detect_collision`] which one to stop. If the newer one wins, it becomes the
//!   long-lived session ([`Session::inherit_history`]).
//! * Routes. The session does not hold the Adj-RIB-Out. On Established it emits
//!   [`Action::Established`] and one [`Action::SendTable`] per negotiated family; the
//!   driver answers with the table as [`Input::Updates`] followed by
//!   [`Input::TableSent`], and the session then sends End-of-RIB (RFC 4724 section 4).
//!   Later changes go through `Input::Updates` as well, so every message leaves through
//!   the session, which counts it and restarts the keepalive timer. A ROUTE-REFRESH from
//!   the peer produces `SendTable { refresh: true }`; with enhanced route refresh the
//!   session brackets the table with BoRR and EoRR (RFC 7313 section 4).
//! * Received routes are validated and counted (see `received`), never stored beyond a
//!   bounded set of prefixes, never installed.
//! * Retries. After a failure (a refused or failed dial, a connection closed or reset
//!   before Established, a NOTIFICATION) the session waits in Idle (the IdleHold timer)
//!   for [`FIRST_RETRY`] doubled per consecutive failure up to `connect_retry`, the
//!   ConnectRetryTime, jittered to 75-100% ([`Session::next_retry`] says until when). A
//!   peer still tearing the last session down refuses us for a moment (FRR while it
//!   clears it, GoBGP for 5 s): the first retries are quick so that such a transient
//!   refusal costs about a second, and the cap keeps a peer that is really gone from
//!   being hammered. A session that was Established for [`STABLE_ESTABLISHED`] starts
//!   again from the first step; one that flaps sooner keeps climbing (damping). A dial
//!   still pending after the ConnectRetryTime is a failure like any other. While waiting,
//!   the session adopts a connection the peer opens ([`Session::accepts`]). A passive
//!   session never dials and listens again at once.
//! * Refusals. A switch that holds a session from our address with another speaker
//!   (the one a migration replaces) answers each attempt with a collision Cease; the
//!   driver hands such a NOTIFICATION in as [`Input::Refusal`] (the second-speaker
//!   rule, [`WatchInput::is_sign`]). The retry then comes after at most
//!   [`REFUSED_RETRY`] however many refusals came before, so that the node's gap when
//!   the other speaker exits stays that short; the backoff is held at that step, and
//!   every other failure still doubles the wait.
//!
//! Choices within RFC 4271 section 8 (the FSM there is conceptual; these keep the
//! externally visible behaviour): every failure goes to Idle and the backoff, so an
//! active session never waits in Active and a passive one never dials; with DelayOpen
//! running, an early OPEN is answered at once, any other message is refused with FSM
//! error 5/0 (RFC 6608), and an error is reported with a NOTIFICATION even though our
//! OPEN has not gone out (the optional SendNOTIFICATIONwithoutOPEN behaviour).

mod collision;
mod config;
mod error;
mod events;
mod fsm;
mod open;
mod received;
mod second_speaker;
mod stats;
mod stop;
mod timers;

pub use collision::{detect_collision, resolve_collision, Collision, Initiator, Side};
pub use config::{
    GrConfig, MaxPrefix, MaxPrefixAction, SessionConfig, MAX_RESTART_TIME, MAX_TIMER,
};
pub use error::{NotificationInfo, SessionError};
pub use events::{Action, Input, State};
pub use fsm::Session;
pub use open::Negotiated;
pub use received::{PrefixCount, RECEIVED_CEILING};
pub use second_speaker::{Finding, SecondSpeakerWatch, WatchEvent, WatchInput};
pub use stats::{message_type, MessageCounts, Stats};
pub use stop::StopReason;
pub use timers::{Timer, FIRST_RETRY, OPEN_HOLD_TIME, REFUSED_RETRY, STABLE_ESTABLISHED};
