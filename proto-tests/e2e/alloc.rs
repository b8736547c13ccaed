//! LoadBalancer IP allocation end to end (issue 30): a real `podcidr-speaker allocate`
//! against the API emulation (`proto-tests/common/apiserver.rs`, in this process,
//! reached through a kubeconfig), two standalone speakers (n1, n2) and BIRD.
//!
//! A LoadBalancer Service created in the emulation gets its address from the
//! bgp-config's pool, written by the allocator to `status.loadBalancer.ingress`; the
//! test then does what a cluster's watch would do for the speakers: it writes that
//! Service, with its status and an EndpointSlice with endpoints on both nodes, into
//! their cluster-state directory, and BIRD learns the /32 from both; an `IPAllocated`
//! Event is kept on the Service. The Service deleted: the allocator releases its address (the next Service gets the same one,
//! the first free), the file removed: both speakers withdraw it.

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::apiserver::{load_balancer, ApiServer, Key, ServedApi};
use crate::fixture::{BgpConfig, Peer, BIRD_AS, NODE_AS};
use crate::harness::bird::Bird;
use crate::harness::process::Process;
use crate::harness::{v4, wait_for, Afi, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::lb::ServiceSpec;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker, BINARY};
use crate::WAIT;

const NODES: [u8; 2] = [1, 2];
const POOL: &str = "198.51.100.0/29";

fn bgp_config() -> String {
    BgpConfig::new([Peer::bird()])
        .section(&format!(
            "address-pools:\n  - name: web\n    protocol: bgp\n    avoid-buggy-ips: true\n    addresses: [{POOL}]\n"
        ))
        .stop_for_good()
        .yaml()
}

/// The Service's first ingress address, once the allocator wrote one.
fn ingress(api: &ApiServer, name: &str) -> Option<String> {
    let svc = api.get(&Key::new("services", "default", name))?;
    svc.pointer("/status/loadBalancer/ingress/0/ip")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn wait_ingress(api: &ApiServer, name: &str, allocator: &Process) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(ip) = ingress(api, name) {
            return ip;
        }
        assert!(
            Instant::now() < deadline,
            "{name} got no address in {WAIT:?}\n{}",
            allocator.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether BIRD holds `prefix` from the node at `from`.
fn bird_has(bird: &Bird, from: IpAddr, prefix: &str) -> bool {
    bird.routes(from, Afi::Ipv4)
        .map(|routes| routes.iter().any(|r| r.prefix == net(prefix)))
        .unwrap_or(false)
}

#[test]
fn allocator_writes_a_new_services_address_and_bird_learns_it_from_both_speakers() {
    let mut addrs = vec![v4(2)];
    addrs.extend(NODES.map(node_ip));
    let Some(ns) = isolated!(&addrs, Duration::from_secs(180)) else {
        return;
    };
    let dir = ns.dir();
    let mut opts = PeerOpts::new(v4(2), BIRD_AS);
    for n in NODES {
        opts = opts.neighbor(Neighbor::new(node_ip(n), NODE_AS));
    }
    let bird = Bird::start(dir, opts).expect("start BIRD");
    let inputs = Inputs::new(dir, "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    for n in NODES {
        inputs.write_node(
            &NodeSpec::new(&format!("n{n}"), node_ip(n)).node_cidrs(&[&format!("10.244.{n}.0/24")]),
        );
    }

    // The emulation serves from a runtime of this process, inside the namespace.
    let api = ServedApi::start();
    let mut cmd = Command::new(BINARY);
    cmd.arg("allocate")
        .arg(format!("--bgp-config={}", inputs.config_path().display()))
        .args([
            "--lease=kube-system/podcidr-speaker-allocator",
            "--identity=alloc-a",
        ])
        .args([
            "--lease-duration=3s",
            "--renew-deadline=2s",
            "--retry-period=500ms",
        ])
        .arg("--metrics-addr=127.0.0.1:9478")
        .env("KUBECONFIG", api.kubeconfig(dir, "alloc-a"))
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or("info".into()),
        );
    let mut allocator =
        Process::spawn("allocator", cmd, &dir.join("allocator.log")).expect("start the allocator");
    let mut speakers: Vec<Speaker> = NODES
        .iter()
        .map(|&n| {
            let name = format!("n{n}");
            let mut args = Speaker::standalone_args(&inputs, &name, node_ip(n));
            args.push("--announce-lb-ips=on".into());
            Speaker::start(dir, &name, &args)
        })
        .collect();
    for (i, n) in NODES.iter().enumerate() {
        bird.wait_established(node_ip(*n), WAIT)
            .unwrap_or_else(|e| panic!("BIRD - n{n}: {e}\n{}", speakers[i].log_tail(30)));
    }

    // A new LoadBalancer Service: the allocator writes the pool's first address that
    // avoid-buggy-ips leaves (.0 skipped).
    api.create("services", "default", load_balancer("default", "web", 80))
        .unwrap();
    let ip = wait_ingress(&api, "web", &allocator);
    assert_eq!(ip, "198.51.100.1", "the first usable address of {POOL}");
    let writes = api.writes();
    assert!(
        writes.iter().any(|w| w.who == "alloc-a"
            && w.method == "PATCH"
            && w.path == "/api/v1/namespaces/default/services/web/status"
            && w.code == 200),
        "{writes:?}"
    );

    // And says so on the Service, as an Event the emulation keeps.
    wait_for("the IPAllocated Event of web", WAIT, || {
        let events = api.list("events");
        events
            .iter()
            .find(|e| e["reason"] == "IPAllocated" && e["regarding"]["name"] == "web")
            .map(|e| assert_eq!(e["type"], "Normal", "{e}"))
            .ok_or_else(|| format!("{events:?}"))
    })
    .unwrap_or_else(|e| panic!("{e}"));

    // What the speakers' Service and EndpointSlice watches would see.
    let web = ServiceSpec::new("web", "Cluster", &[&ip]).endpoints(&["n1", "n2"], true);
    inputs.write_cluster_file(&web.file(), &web.yaml());
    let host = format!("{ip}/32");
    for (i, n) in NODES.iter().enumerate() {
        wait_for(&format!("BIRD learns {host} from n{n}"), WAIT, || {
            if bird_has(&bird, node_ip(*n), &host) {
                Ok(())
            } else {
                Err(speakers[i].log_tail(10))
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }

    // Deleted: the speakers withdraw it once it leaves their cluster state ...
    api.delete(&Key::new("services", "default", "web")).unwrap();
    inputs.delete_cluster_file(&web.file());
    for n in NODES {
        wait_for(&format!("BIRD drops {host} from n{n}"), WAIT, || {
            if bird_has(&bird, node_ip(n), &host) {
                Err("still held".to_owned())
            } else {
                Ok(())
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    // ... and the allocator has released it: the next Service gets the same address.
    api.create("services", "default", load_balancer("default", "next", 81))
        .unwrap();
    assert_eq!(wait_ingress(&api, "next", &allocator), ip, "released");

    for s in &mut speakers {
        s.terminate();
    }
    let status = allocator.stop().expect("stop the allocator");
    assert!(
        status.success(),
        "allocator exit: {status}\n{}",
        allocator.log_tail(30)
    );
    drop(api);
}
