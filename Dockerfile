# vouch serve in a container (docs/packaging.md, "The container image"):
#   docker build -t vouch .
#   docker run -d --name vouch -p 8140:8140 -v vouch-data:/var/lib/vouch --stop-timeout 30 \
#       vouch serve --listen 0.0.0.0:8140 --server-name puppet-ca.example.com
# The build stage's cache mounts need BuildKit (docker's builder since 23.0).

# Build: Debian 12 with a current stable Rust (vouch needs 1.85 or later). aws-lc-rs builds
# its C part with the image's gcc; no cmake, clang or Go is needed on x86_64 and aarch64.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY derive ./derive
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin vouch \
    && install -m 0755 target/release/vouch /usr/local/bin/vouch

# Run: the binary, CA certificates, an unprivileged user and the data directory.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 vouch \
    && useradd --system --uid 10001 --gid vouch --home-dir /var/lib/vouch --no-create-home \
       --shell /usr/sbin/nologin vouch \
    && install -d -o vouch -g vouch -m 0700 /var/lib/vouch
COPY --from=build /usr/local/bin/vouch /usr/bin/vouch
# The data directory (the CA, its keys and store): keep it on a volume.
ENV VOUCH_DIR=/var/lib/vouch
VOLUME /var/lib/vouch
USER 10001:10001
WORKDIR /var/lib/vouch
EXPOSE 8140
# SIGTERM (docker stop): vouch finishes the requests in flight (10 s at most) and checkpoints.
STOPSIGNAL SIGTERM
ENTRYPOINT ["vouch"]
# Every interface of the container; add --server-name with the names agents use.
CMD ["serve", "--listen", "0.0.0.0:8140"]
