# syntax=docker/dockerfile:1.4
# spexd container image, two stages: `build` compiles spexd with the project's own scripts
# (scripts/container-build.sh → install-deps.sh + build.sh), `runtime` holds the binaries,
# the Debian/Ubuntu packages of their shared libraries and nothing else.
#
#   GPU image (default bases: NVIDIA CUDA 13.0 on Ubuntu 24.04; needs the NVIDIA container toolkit to run):
#     docker build -t spexd:gpu --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#   CPU image (same steps, Debian 12 bases, CUDA off):
#     docker build -t spexd:cpu --build-arg BUILD_BASE=debian:12 --build-arg RUNTIME_BASE=debian:12 \
#       --build-arg SPEXD_WITH_CUDA=OFF .
#
# Both bases and the CUDA switch are the only differences between the two images
# (tests/deploy/container_test.sh builds and runs the CPU one; docs/deploy.md).
ARG BUILD_BASE=nvcr.io/nvidia/cuda:13.0.0-devel-ubuntu24.04
ARG RUNTIME_BASE=nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04

FROM ${BUILD_BASE} AS build
ARG SPEXD_WITH_CUDA=ON
ARG CUDA_ARCHITECTURES="80-real;90-real;100-real;100-virtual"
ARG JOBS=
# ccache's directory for the compile step: the cache mount below unless a build points it
# elsewhere. tests/deploy/container_test.sh points it at the host's ccache, mounted with
# `buildah bud -v`, so that the image's compile reuses the host build's objects (a cache
# mount is the builder's own directory, empty on a fresh CI machine).
ARG CCACHE_DIR=/root/.cache/ccache
ENV DEBIAN_FRONTEND=noninteractive
# apt lists and .debs, and ccache, persist across builds in cache mounts (not in layers).
RUN --mount=type=cache,id=spexd-apt-lists,target=/var/lib/apt/lists \
    --mount=type=cache,id=spexd-apt-archives,target=/var/cache/apt/archives \
    rm -f /etc/apt/apt.conf.d/docker-clean && apt-get update -q && \
    apt-get install -y -q --no-install-recommends bash ca-certificates
WORKDIR /src
COPY . /src
RUN --mount=type=cache,id=spexd-apt-lists,target=/var/lib/apt/lists \
    --mount=type=cache,id=spexd-apt-archives,target=/var/cache/apt/archives \
    --mount=type=cache,id=spexd-ccache,target=/root/.cache/ccache \
    SPEXD_WITH_CUDA=${SPEXD_WITH_CUDA} CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" JOBS=${JOBS} \
    scripts/container-build.sh /opt/spexd

FROM ${RUNTIME_BASE} AS runtime
ARG VERSION=dev
ARG REVISION=unknown
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /opt/spexd /opt/spexd
# Only the packages that hold the shared libraries of spexd, spexctl and libspexd_cuda.so
# (listed by scripts/runtime-packages.sh in the build stage, same distribution).
RUN --mount=type=cache,id=spexd-apt-lists,target=/var/lib/apt/lists \
    --mount=type=cache,id=spexd-apt-archives,target=/var/cache/apt/archives \
    rm -f /etc/apt/apt.conf.d/docker-clean && apt-get update -q && \
    xargs -a /opt/spexd/share/spexd/runtime-packages.txt \
      apt-get install -y -q --no-install-recommends && \
    groupadd --system --gid 10001 spexd && \
    useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin spexd && \
    mkdir -p /data /etc/spexd && \
    if ldd /opt/spexd/bin/* /opt/spexd/lib/spexd/* 2>/dev/null | grep 'not found'; then exit 1; fi
ENV PATH=/opt/spexd/bin:${PATH} \
    SPEXD_CUDA_MODULE=/opt/spexd/lib/spexd/libspexd_cuda.so \
    SPEXD_PORT=50051 \
    SPEXD_METRICS_PORT=9464 \
    SPEXD_DATA_ROOTS=/data \
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1
LABEL org.opencontainers.image.title="spexd" \
      org.opencontainers.image.description="gRPC service extracting 1D spectra from 2D DESI CCD frames" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# Numeric, so that Kubernetes' runAsNonRoot can check it (deploy/kubernetes).
USER 10001:10001
WORKDIR /
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD spexctl health --server "127.0.0.1:${SPEXD_PORT}" --retries 1 --deadline 4 >/dev/null || exit 1
# All interfaces (the container's network is its boundary; the server's own default is
# loopback), metrics on their own port, /data as the only data root. Extra arguments
# (e.g. --config=/etc/spexd/spexd.conf, --backend=cpu) follow and win over the defaults.
ENTRYPOINT ["/opt/spexd/bin/spexd-entrypoint"]
