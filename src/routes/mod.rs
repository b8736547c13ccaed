//! Route planning (pure): desired routes per peer and the diff against Adj-RIB-Out.
