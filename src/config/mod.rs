//! The MetalLB-style bgp-config: raw serde structs -> validated Config.
