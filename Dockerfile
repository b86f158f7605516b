# The ascend-device-plugin image, for linux/arm64 (Atlas 200I A2 boards, Kunpeng
# servers) and linux/amd64 alike; nothing below depends on the architecture:
#
#   docker buildx build --platform linux/arm64,linux/amd64 -t <registry>/ascend-device-plugin:0.1.0 --push .
#
# (one manifest list for both; without buildx, and what CI checks of each: docs/deployment.md).
#
# No "# syntax=" line, deliberately: it would make BuildKit pull a frontend image
# from Docker Hub before reading anything else, so no mirror below could help.
# The engine's built-in frontend has every feature used here.
#
# Behind a mirror or a TLS-intercepting proxy, where Docker Hub or PyPI time out:
#   --build-arg BASE_REGISTRY=<mirror host>   where the base image comes from
#   --build-arg BASE_IMAGE=<image>            or any other image with the same Python
#   --build-arg PIP_INDEX_URL=<index URL>     the Python package index the builder uses
#   --secret id=ca-bundle,src=<PEM file>      CA certificates the builder trusts for
#                                             that index instead of pip's own (a secret:
#                                             it never lands in a layer)
#
# Reproducible: every package comes from requirements.lock (the plugin's
# dependencies) or requirements-build.lock (what builds its wheel), each pinned
# to one version with the hashes of its files, checked by pip (--require-hashes):
# two builds of one commit install the same packages, byte for byte. The command
# that regenerates a lock is at its top (docs/deployment.md#the-image).
#
# Why this base: libdcmi.so and the driver libraries are the host's, built
# against the host's glibc, and they load into this image's Python. They run on
# any glibc at least as new as the one they were built for, so the image needs a
# glibc no older than the hosts'. Debian bookworm has 2.36 (the driver's hosts:
# Ubuntu 22.04, 2.35; openEuler 22.03, 2.34). Another BASE_IMAGE needs at least
# 2.35 (docs/deployment.md).

ARG PYTHON_VERSION=3.11
ARG BASE_REGISTRY=docker.io
ARG BASE_IMAGE=${BASE_REGISTRY}/library/python:${PYTHON_VERSION}-slim-bookworm

# -- Builder: every dependency as the locked wheels, and our own wheel, without root --
FROM ${BASE_IMAGE} AS builder
ARG PIP_INDEX_URL
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 builder
USER 10001
WORKDIR /home/builder/src
# The locks first: their layers stay cached while only the code changes.
COPY --chown=10001 requirements.lock requirements-build.lock ./
# The dependencies' wheels, exactly the locked files (wheels only: nothing is compiled),
# and the lock itself beside them for the runtime stage.
RUN --mount=type=secret,id=ca-bundle,uid=10001 \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
    && python -m pip wheel --require-hashes --no-deps --only-binary=:all: \
        --wheel-dir /home/builder/wheels -r requirements.lock
# The locked build backend (hatchling), for the user that builds.
RUN --mount=type=secret,id=ca-bundle,uid=10001 \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
    && python -m pip install --user --require-hashes --no-deps --only-binary=:all: \
        -r requirements-build.lock
COPY --chown=10001 pyproject.toml README.md ./
COPY --chown=10001 ascend_plugin ascend_plugin
COPY --chown=10001 backends backends
# Our wheel, with that backend and no index: nothing unlocked comes in.
RUN python -m pip wheel --no-index --no-deps --no-build-isolation --wheel-dir /home/builder/wheels . \
    && cp requirements.lock /home/builder/wheels/

# -- Runtime ------------------------------------------------------------------------
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="ascend-device-plugin" \
      org.opencontainers.image.description="Kubernetes device plugin for Huawei Ascend NPUs (310, 310B, 310P, 910)" \
      org.opencontainers.image.licenses="Apache-2.0"
# No byte code in the image (--no-compile below): it would be a third of the
# layer (33 of 81 MB). Python compiles what it imports in memory instead, at
# each start: about 0.4 s before registration, 1.4 s more when the Kubernetes
# side starts (measured on CI's 2-core machine). PYTHONDONTWRITEBYTECODE keeps
# it from trying to write any: the chart's root file system is read-only.
# LD_LIBRARY_PATH: where the driver keeps libdcmi.so's dependencies on servers
# and cards (the chart's libraryPath sets the same).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/driver:/usr/local/Ascend/driver/lib64/common
# Installed from the builder's wheels only, checked against the lock's hashes once
# more: no index is reached in this stage, and no wheel, compiler or test
# dependency stays behind in a layer.
RUN --mount=type=bind,from=builder,source=/home/builder/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-compile --no-index --find-links=/wheels \
        --require-hashes --no-deps -r /wheels/requirements.lock \
    && python -m pip install --no-cache-dir --no-compile --no-index --no-deps \
        /wheels/ascend_device_plugin-*.whl \
    && ascend-device-plugin version
# Root, deliberately: the plugin opens the NPU device nodes through libdcmi,
# creates its socket in the kubelet's root-owned device-plugin directory, and
# the driver's files and device nodes on the host belong to root. Everything that can run without
# root does: the build above runs as an unprivileged user, and the image's
# files are read-only to the plugin at run time.
# hadolint ignore=DL3002
USER 0:0
EXPOSE 11251
ENTRYPOINT ["ascend-device-plugin"]
CMD ["run"]
