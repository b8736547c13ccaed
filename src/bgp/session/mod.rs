//! RFC 4271 section 8 session state machine (sans-IO). Filled in by the sessions work.
