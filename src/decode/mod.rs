//! Readers for the `decode` command: MRT (RFC 6396) and pcap framing of BGP messages.
