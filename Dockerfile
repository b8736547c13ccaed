# syntax=docker/dockerfile:1
#
# The podcidr-speaker image: compiled in the official Rust image, run from distroless
# cc-debian12 (glibc, which is all the binary links: GCC's unwinder is linked in; no
# shell, no package manager) as uid 65532. Build with BuildKit (the default builder since
# Docker 23):
#
#   docker build --build-arg GIT_SHA="$(git rev-parse --short=12 HEAD)" \
#     -t ghcr.io/podcidr/podcidr-speaker:0.1.0 .
#   docker build --build-arg GIT_SHA="$(git rev-parse --short=12 HEAD)" \
#     --target runtime-listen -t ghcr.io/podcidr/podcidr-speaker:0.1.0-listen .
#
# The tag is the version in Cargo.toml (proto-tests/deploy/manifests.rs holds deploy/ to
# it). At release, pin both FROM lines by digest (`image:tag@sha256:...`) and record the
# pushed image's digest as deploy/README.md explains.

FROM rust:1.95-bookworm AS build
# Baked into `podcidr-speaker --version` beside CARGO_PKG_VERSION; the build context
# has no .git (see .dockerignore), so the commit comes in as this argument.
ARG GIT_SHA=""
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    GIT_SHA="${GIT_SHA}" cargo build --release --locked --bin podcidr-speaker \
 && install -D -m 0755 target/release/podcidr-speaker /out/podcidr-speaker
# The binary must run and report the version the image is tagged with.
RUN expected="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)" \
 && reported="$(/out/podcidr-speaker --version)" \
 && echo "built: ${reported}" \
 && case "${reported}" in \
      *"${expected}"*) ;; \
      *) echo "--version says '${reported}', Cargo.toml says ${expected}" >&2; exit 1 ;; \
    esac

# The listen variant's binary carries the file capability cap_net_bind_service=+ep, the
# only way a non-root process keeps NET_BIND_SERVICE across exec under Kubernetes (no
# ambient capabilities). Only this variant: with all capabilities dropped, as the default
# manifests do, the kernel refuses to exec a binary whose file capabilities it cannot
# grant. BuildKit's COPY --from keeps the security.capability xattr; the legacy builder
# and kaniko drop it.
FROM build AS build-listen
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcap2-bin \
 && rm -rf /var/lib/apt/lists/* \
 && install -m 0755 /out/podcidr-speaker /out/podcidr-speaker-listen \
 && setcap cap_net_bind_service=+ep /out/podcidr-speaker-listen \
 && getcap /out/podcidr-speaker-listen | grep -q cap_net_bind_service

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime-base
ARG GIT_SHA=""
LABEL org.opencontainers.image.title="podcidr-speaker" \
      org.opencontainers.image.description="BGP speaker announcing each Kubernetes node's pod CIDRs to its top-of-rack switches" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${GIT_SHA}"
# Numeric, so the kubelet can verify runAsNonRoot against the image.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/podcidr-speaker"]
CMD ["run"]

FROM runtime-base AS runtime-listen
COPY --from=build-listen /out/podcidr-speaker-listen /usr/local/bin/podcidr-speaker

# Last, so a plain `docker build` produces it.
FROM runtime-base AS runtime
COPY --from=build /out/podcidr-speaker /usr/local/bin/podcidr-speaker
