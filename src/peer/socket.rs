//! Socket options and the dial: TCP_NODELAY, TCP MD5 signatures (RFC 2385, Linux
//! TCP_MD5SIG), the TTL of directly connected and multihop sessions, GTSM (RFC 5082:
//! IP_MINTTL / IPV6_MINHOPCOUNT), binding the source address, and a connect bounded in
//! time. Everything here is set before the handshake, so that the SYN already carries
//! the signature and the TTL.
//!
//! BFD's UDP sockets (RFC 5881 single-hop, RFC 5883 multihop) are made here too: the
//! receiving socket of a local address and port (3784 or 4784) asks the kernel for each
//! packet's TTL or hop limit (IP_RECVTTL / IPV6_RECVHOPLIMIT, read back from the
//! control messages of `recvmsg`), and each session's sending socket is bound to a
//! source port of 49152-65535 and sends with TTL (hop limit) 255.
//!
//! One of three places with `unsafe` (Cargo.toml denies `unsafe_code` everywhere else;
//! the others are `memory.rs` and `main.rs`'s `pow`): the setsockopt and getsockopt calls socket2 does not offer, each with the reason it is
//! sound.
#![allow(unsafe_code)]

use super::transport::{Transport, TtlPolicy};
use super::PeerError;
use crate::config::Secret;
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use tokio::net::{TcpSocket, TcpStream, UdpSocket};

/// Linux `struct tcp_md5sig` (include/uapi/linux/tcp.h), passed to setsockopt
/// TCP_MD5SIG: the peer address the key applies to and the key.
#[repr(C)]
pub(crate) struct TcpMd5Sig {
    addr: libc::sockaddr_storage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; libc::TCP_MD5SIG_MAXKEYLEN],
}

// The config's key limit (the one rule, `config::MD5_KEY_MAX`) must fit the kernel's.
const _: () = assert!(crate::config::MD5_KEY_MAX <= libc::TCP_MD5SIG_MAXKEYLEN);

impl TcpMd5Sig {
    /// The option value for `peer` on a socket of `socket_v6` family (an IPv4 peer on an
    /// IPv6 socket is written as its IPv4-mapped address, which is how the kernel sees
    /// it). An empty key removes the peer's key. Fails for a key longer than 80 octets.
    pub(crate) fn new(peer: IpAddr, socket_v6: bool, key: &[u8]) -> io::Result<TcpMd5Sig> {
        if key.len() > crate::config::MD5_KEY_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tcp md5 key longer than 80 octets",
            ));
        }
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value (an
        // unspecified family).
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let peer = match peer {
            IpAddr::V4(a) if socket_v6 => IpAddr::V6(a.to_ipv6_mapped()),
            other => other,
        };
        match peer {
            IpAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: 0,
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned at least as
                // strictly as sockaddr_in (that is its purpose), and `addr` is a valid,
                // exclusively borrowed value.
                unsafe {
                    std::ptr::write(
                        (&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(),
                        sin,
                    )
                };
            }
            IpAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: 0,
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.octets(),
                    },
                    sin6_scope_id: 0,
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe {
                    std::ptr::write(
                        (&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
                        sin6,
                    )
                };
            }
        }
        let mut sig = TcpMd5Sig {
            addr,
            flags: 0,
            prefixlen: 0,
            // At most 80, checked above.
            keylen: key.len() as u16,
            ifindex: 0,
            key: [0; libc::TCP_MD5SIG_MAXKEYLEN],
        };
        sig.key[..key.len()].copy_from_slice(key);
        Ok(sig)
    }
}

/// Sets (or with `None` removes) the TCP MD5 key for `peer` on `socket`, an IPv6
/// socket when `socket_v6`: on a connecting socket before connect, on a listening socket
/// once per peer.
pub(crate) fn set_md5(
    socket: &impl AsRawFd,
    socket_v6: bool,
    peer: IpAddr,
    key: Option<&Secret>,
) -> io::Result<()> {
    let key = key.map_or(&[][..], |k| k.expose().as_bytes());
    let sig = TcpMd5Sig::new(peer, socket_v6, key)?;
    setsockopt(socket, libc::IPPROTO_TCP, libc::TCP_MD5SIG, &sig)
}

/// The TTL (IPv4) or hop limit (IPv6) to send with, and for GTSM the lowest one
/// accepted.
pub(crate) fn set_ttl(socket: &Socket, v6: bool, policy: TtlPolicy) -> io::Result<()> {
    if v6 {
        socket.set_unicast_hops_v6(policy.ttl())?;
    } else {
        socket.set_ttl_v4(policy.ttl())?;
    }
    if let Some(min) = policy.min_ttl() {
        // Both options take an int (ip(7), ipv6(7)).
        let min = min as libc::c_int;
        if v6 {
            setsockopt(socket, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT, &min)?;
        } else {
            setsockopt(socket, libc::IPPROTO_IP, libc::IP_MINTTL, &min)?;
        }
    }
    Ok(())
}

/// A connection the peer opened: the same options as a dialed one, except MD5, which
/// the listening socket already carried.
pub(crate) fn prepare_accepted(stream: &TcpStream, policy: TtlPolicy) -> io::Result<()> {
    let sock = SockRef::from(stream);
    sock.set_tcp_nodelay(true)?;
    let v6 = stream.local_addr()?.is_ipv6();
    set_ttl(&sock, v6, policy)
}

/// Dials the peer as `t` says, within `t.connect_timeout`.
pub(crate) async fn connect(t: Transport) -> Result<TcpStream, PeerError> {
    let remote = t.remote;
    let err = |op| move |e| PeerError::socket(op, remote, e);
    let socket = Socket::new(
        Domain::for_address(remote),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(err("socket"))?;
    socket
        .set_nonblocking(true)
        .map_err(err("set nonblocking"))?;
    socket
        .set_tcp_nodelay(true)
        .map_err(err("setsockopt TCP_NODELAY"))?;
    set_ttl(&socket, remote.is_ipv6(), t.ttl).map_err(err("setsockopt ttl"))?;
    if let Some(src) = t.source {
        socket
            .bind(&SocketAddr::new(src, 0).into())
            .map_err(err("bind source address"))?;
    }
    if let Some(key) = &t.md5_key {
        set_md5(&socket, remote.is_ipv6(), remote.ip(), Some(key))
            .map_err(err("setsockopt TCP_MD5SIG"))?;
    }
    let socket = TcpSocket::from_std_stream(socket.into());
    match tokio::time::timeout(t.connect_timeout, socket.connect(remote)).await {
        Ok(r) => r.map_err(err("connect")),
        Err(_) => Err(PeerError::ConnectTimeout {
            addr: remote,
            after: t.connect_timeout,
        }),
    }
}

/// The lowest and highest source port of a BFD session (RFC 5881 section 4, RFC 5883
/// section 5).
pub(crate) const BFD_SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

/// The receiving socket of BFD control packets on `local` (a wildcard or a local
/// address, port 3784 or 4784): each packet's TTL (IPv4) or hop limit (IPv6) comes with
/// it. SO_REUSEADDR lets the wildcard socket of one session and the address socket of
/// another share the port (the kernel gives a packet to the most specific one).
pub(crate) fn bfd_receiver(local: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    socket.set_reuse_address(true)?;
    let on: libc::c_int = 1;
    if local.is_ipv6() {
        socket.set_only_v6(true)?;
        setsockopt(&socket, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, &on)?;
    } else {
        setsockopt(&socket, libc::IPPROTO_IP, libc::IP_RECVTTL, &on)?;
    }
    socket.bind(&local.into())?;
    UdpSocket::from_std(socket.into())
}

/// The sending socket of one BFD session: bound to `source` (a wildcard lets the
/// kernel choose the address) and the first free port of [`BFD_SOURCE_PORTS`] from
/// `first` on, sending with TTL / hop limit 255 (RFC 5881 section 5: the receiver drops
/// anything less on a single-hop session).
pub(crate) fn bfd_sender(source: IpAddr, first: u16) -> io::Result<UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(SocketAddr::new(source, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    socket.set_nonblocking(true)?;
    if source.is_ipv6() {
        socket.set_only_v6(true)?;
        socket.set_unicast_hops_v6(255)?;
    } else {
        socket.set_ttl_v4(255)?;
    }
    let (lo, hi) = (*BFD_SOURCE_PORTS.start(), *BFD_SOURCE_PORTS.end());
    let span = u32::from(hi - lo) + 1;
    let start = u32::from(first.clamp(lo, hi) - lo);
    let mut last = io::Error::from(io::ErrorKind::AddrInUse);
    for i in 0..span {
        // Fits: the offset is below `span`, so the port is at most `hi`.
        let port = lo + ((start + i) % span) as u16;
        match socket.bind(&SocketAddr::new(source, port).into()) {
            Ok(()) => return UdpSocket::from_std(socket.into()),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// One datagram read from a [`bfd_receiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Datagram {
    pub len: usize,
    pub from: SocketAddr,
    /// The TTL or hop limit it arrived with; `None` if the kernel gave none (it always
    /// does once the option is set: such a packet is dropped as spoofable).
    pub ttl: Option<u8>,
    /// The payload did not fit the buffer.
    pub truncated: bool,
}

/// Reads one datagram and its TTL / hop limit without blocking (`WouldBlock` when none
/// is queued).
pub(crate) fn recv_with_ttl(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<Datagram> {
    socket.try_io(tokio::io::Interest::READABLE, || recvmsg_ttl(socket, buf))
}

fn recvmsg_ttl(socket: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Datagram> {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len(),
    };
    // Room for one int-sized control message (the TTL or the hop limit), u64-aligned
    // as cmsghdr needs, with slack for anything else the kernel adds.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain old data; all zeroes is a valid value, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast::<libc::c_void>();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points at a live, exclusively borrowed buffer of
    // the length given next to it; the kernel writes at most those lengths.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut ttl = None;
    // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR walk the control buffer the kernel filled in,
    // within msg_controllen; each header is read only after the macro returned it
    // non-null, and CMSG_DATA of an IP_TTL / IPV6_HOPLIMIT message holds one int
    // (ip(7), ipv6(7)), read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let h = &*cmsg;
            let is_ttl = (h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_TTL)
                || (h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_HOPLIMIT);
            if is_ttl {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                ttl = u8::try_from(v).ok();
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let from = sockaddr_to_std(&from).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram from an unknown address family",
        )
    })?;
    Ok(Datagram {
        // Not negative, checked above.
        len: n as usize,
        from,
        ttl,
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
    })
}

/// The socket address in `storage`, written by the kernel for an AF_INET or AF_INET6
/// socket.
fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // and aligned enough for.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn setsockopt<T>(
    socket: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a valid, initialised T borrowed for the call and its exact size
    // is passed; the kernel only reads that many bytes. The fd is owned by `socket`.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (value as *const T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::net::Ipv4Addr;

    /// A BFD sender and receiver over loopback, both families: the packet arrives with
    /// the sender's TTL 255 read from its control message, from a port of 49152-65535;
    /// a plain socket's packet arrives with the default TTL, which single-hop refuses.
    #[tokio::test]
    async fn a_bfd_packet_arrives_with_its_ttl_from_a_bfd_source_port() {
        for local in [IpAddr::from(Ipv4Addr::LOCALHOST), "::1".parse().unwrap()] {
            let rx = bfd_receiver(SocketAddr::new(local, 0)).unwrap();
            let to = rx.local_addr().unwrap();
            let tx = bfd_sender(local, 65535).unwrap();
            let port = tx.local_addr().unwrap().port();
            assert!(BFD_SOURCE_PORTS.contains(&port), "{port}");
            tx.send_to(&[0x20, 0x40, 0x03, 0x18], to).await.unwrap();
            let mut buf = [0u8; 64];
            let d = loop {
                rx.readable().await.unwrap();
                match recv_with_ttl(&rx, &mut buf) {
                    Ok(d) => break d,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => panic!("{e}"),
                }
            };
            assert_eq!(d.len, 4);
            assert_eq!(&buf[..4], &[0x20, 0x40, 0x03, 0x18]);
            assert_eq!(d.from, tx.local_addr().unwrap());
            assert_eq!(d.ttl, Some(255), "{local}");
            assert!(!d.truncated);

            let plain = std::net::UdpSocket::bind(SocketAddr::new(local, 0)).unwrap();
            plain.send_to(&[1, 2, 3], to).unwrap();
            let d = loop {
                rx.readable().await.unwrap();
                match recv_with_ttl(&rx, &mut buf[..2]) {
                    Ok(d) => break d,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => panic!("{e}"),
                }
            };
            assert_ne!(d.ttl, Some(255), "{local}: a default TTL");
            assert!(d.ttl.is_some());
            assert!(d.truncated, "3 octets into a 2-octet buffer");
        }
    }

    /// Two sessions from one address get two source ports.
    #[test]
    fn bfd_senders_take_distinct_ports() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _g = rt.enter();
        let a = bfd_sender(Ipv4Addr::LOCALHOST.into(), 60000).unwrap();
        let b = bfd_sender(Ipv4Addr::LOCALHOST.into(), 60000).unwrap();
        assert_ne!(a.local_addr().unwrap(), b.local_addr().unwrap());
        assert_eq!(a.ttl().unwrap(), 255);
    }

    /// IP_MINTTL of an IPv4 socket (0: not filtering).
    fn min_ttl(s: &impl AsRawFd) -> libc::c_int {
        let mut min: libc::c_int = -1;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `min`, an int.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MINTTL,
                (&mut min as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(
            rc,
            0,
            "getsockopt IP_MINTTL: {}",
            io::Error::last_os_error()
        );
        min
    }

    fn bytes(sig: &TcpMd5Sig) -> &[u8] {
        // SAFETY: reading the bytes of a repr(C) value with no padding holes that were
        // left uninitialised: the struct was built from zeroed storage and whole fields.
        unsafe {
            std::slice::from_raw_parts(
                (sig as *const TcpMd5Sig).cast::<u8>(),
                size_of::<TcpMd5Sig>(),
            )
        }
    }

    #[test]
    fn md5sig_has_the_kernel_layout() {
        // include/uapi/linux/tcp.h: 128-octet address, flags, prefixlen, keylen, ifindex,
        // 80-octet key.
        assert_eq!(size_of::<TcpMd5Sig>(), 216);
        assert_eq!(offset_of!(TcpMd5Sig, flags), 128);
        assert_eq!(offset_of!(TcpMd5Sig, prefixlen), 129);
        assert_eq!(offset_of!(TcpMd5Sig, keylen), 130);
        assert_eq!(offset_of!(TcpMd5Sig, ifindex), 132);
        assert_eq!(offset_of!(TcpMd5Sig, key), 136);
    }

    #[test]
    fn md5sig_carries_the_address_and_key() {
        let sig =
            TcpMd5Sig::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), false, b"s3cret").unwrap();
        let b = bytes(&sig);
        assert_eq!(&b[0..2], &(libc::AF_INET as u16).to_ne_bytes());
        assert_eq!(&b[2..4], &[0x00, 0x00], "port is not part of the key");
        assert_eq!(&b[4..8], &[0xc0, 0x00, 0x02, 0x01]);
        assert_eq!(&b[130..132], &6u16.to_ne_bytes());
        assert_eq!(&b[136..142], b"s3cret");
        assert!(b[142..216].iter().all(|x| *x == 0));

        // An IPv4 peer on an IPv6 (dual-stack) listener: the IPv4-mapped address.
        let sig = TcpMd5Sig::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), true, b"k").unwrap();
        let b = bytes(&sig);
        assert_eq!(&b[0..2], &(libc::AF_INET6 as u16).to_ne_bytes());
        assert_eq!(
            &b[8..24],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xc0, 0x00, 0x02, 0x01]
        );
        let sig = TcpMd5Sig::new("2001:db8::1".parse().unwrap(), true, b"").unwrap();
        let b = bytes(&sig);
        assert_eq!(&b[8..12], &[0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(&b[130..132], &0u16.to_ne_bytes(), "empty key removes");

        assert!(TcpMd5Sig::new(IpAddr::V4(Ipv4Addr::LOCALHOST), false, &[b'k'; 81]).is_err());
    }

    #[test]
    fn options_are_accepted_by_the_kernel() {
        // Needs no network: a socket bound to loopback, never connected.
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        s.bind(&SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0).into())
            .unwrap();
        set_ttl(&s, false, TtlPolicy::Gtsm).unwrap();
        assert_eq!(s.ttl_v4().unwrap(), 255);
        assert_eq!(min_ttl(&s), 255);
        set_ttl(&s, false, TtlPolicy::Direct).unwrap();
        assert_eq!(s.ttl_v4().unwrap(), 1);
        let peer = Ipv4Addr::new(127, 0, 0, 2).into();
        set_md5(&s, false, peer, Some(&Secret::new("k"))).unwrap();
        set_md5(&s, false, peer, None).unwrap();
    }

    /// The transport of a configured peer on 127.0.0.1:`port`, built as the daemon
    /// builds it (`config::parse` -> `PeerSpec::from_config`).
    fn dial_spec(port: u16, my_asn: u32, extra: &str) -> super::super::transport::Transport {
        use super::super::spec::{PeerSpec, RunOverrides};
        let text = format!(
            "peers:\n  - peer-address: 127.0.0.1\n    peer-port: {port}\n    peer-asn: 65000\n    \
             my-asn: {my_asn}\n{extra}"
        );
        let cfg = crate::config::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let run = RunOverrides {
            source_address: Some(Ipv4Addr::LOCALHOST.into()),
            router_id: Some(Ipv4Addr::new(192, 0, 2, 10)),
            ..RunOverrides::default()
        };
        let mut t = PeerSpec::from_config(&cfg.peers[0], &run)
            .unwrap()
            .transport;
        t.connect_timeout = std::time::Duration::from_secs(2);
        t
    }

    /// A live dial over loopback, for each TTL policy the configuration can ask for:
    /// the connected socket (and the accepted one, as `prepare_accepted` leaves it)
    /// carries TCP_NODELAY, the policy's TTL and, for GTSM, IP_MINTTL 255.
    #[tokio::test]
    async fn a_dialed_session_has_nodelay_and_the_ttl_of_its_policy() {
        let cases = [
            // (case, my-asn, extra config, policy, IP_TTL, IP_MINTTL)
            (
                "directly connected eBGP",
                65001,
                "",
                TtlPolicy::Direct,
                1,
                0,
            ),
            (
                "eBGP multihop",
                65001,
                "    ebgp-multihop: true\n",
                TtlPolicy::Multihop,
                255,
                0,
            ),
            ("iBGP", 65000, "", TtlPolicy::Multihop, 255, 0),
            (
                "GTSM",
                65001,
                "    ttl-security: true\n",
                TtlPolicy::Gtsm,
                255,
                255,
            ),
        ];
        for (case, my_asn, extra, policy, ttl, min) in cases {
            let listener = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
            // The peer side of a GTSM session sends with 255 too: its SYN-ACK must pass
            // our IP_MINTTL.
            listener.set_ttl_v4(255).unwrap();
            listener
                .bind(&SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0).into())
                .unwrap();
            listener.listen(1).unwrap();
            let port = listener.local_addr().unwrap().as_socket().unwrap().port();
            let t = dial_spec(port, my_asn, extra);
            assert_eq!(t.ttl, policy, "{case}");
            assert_eq!(t.source, Some(Ipv4Addr::LOCALHOST.into()), "{case}");

            let stream = connect(t).await.unwrap_or_else(|e| panic!("{case}: {e}"));
            let sock = SockRef::from(&stream);
            assert!(sock.tcp_nodelay().unwrap(), "{case}: TCP_NODELAY");
            assert_eq!(sock.ttl_v4().unwrap(), ttl, "{case}: IP_TTL");
            assert_eq!(min_ttl(&stream), min, "{case}: IP_MINTTL");

            let (accepted, from) = listener.accept().unwrap();
            assert_eq!(from.as_socket(), stream.local_addr().ok(), "{case}");
            accepted.set_nonblocking(true).unwrap();
            let accepted = TcpStream::from_std(accepted.into()).unwrap();
            prepare_accepted(&accepted, policy).unwrap();
            let sock = SockRef::from(&accepted);
            assert!(sock.tcp_nodelay().unwrap(), "{case}: accepted TCP_NODELAY");
            assert_eq!(sock.ttl_v4().unwrap(), ttl, "{case}: accepted IP_TTL");
            assert_eq!(min_ttl(&accepted), min, "{case}: accepted IP_MINTTL");
        }
    }

    /// GTSM on a live dial: a peer whose packets arrive with TTL 64 (a peer that does
    /// not do GTSM, or one more hop away) never completes the handshake.
    #[tokio::test]
    async fn gtsm_refuses_a_peer_that_does_not_send_with_255() {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_ne!(SockRef::from(&listener).ttl_v4().unwrap(), 255);
        let t = dial_spec(port, 65001, "    ttl-security: true\n");
        match connect(t).await {
            Err(PeerError::ConnectTimeout { .. }) => {}
            other => panic!("the SYN-ACK with TTL 64 must be dropped: {other:?}"),
        }
    }
}
