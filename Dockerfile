# Pairwise Arena with its two demo models, CPU only, served as `make run` serves them: llama.cpp's
# server for the GGUF models and the compiled C modules, both built in a first stage that has a
# compiler, so that the slim image needs none.
#   docker build -t pairwise-arena .
#   docker run -p 7860:7860 -v arena-data:/data pairwise-arena
# Every step after a base image is a script that CI runs too (there is no Docker engine there):
# scripts/docker-build-native.sh in the build stage; scripts/install.sh as in the README, then
# scripts/docker-setup.sh in the image. tests/unit/config/test_deploy_files.py checks that this file keeps
# calling them. docs/deploy.md has the options.
FROM python:3.11-slim AS native
# 0 leaves llama.cpp's server out (GGUF models are then served by transformers)
ARG LLAMACPP=1
WORKDIR /src
COPY . /src
RUN LLAMACPP="$LLAMACPP" PYTHON=python bash scripts/docker-build-native.sh /out

FROM python:3.11-slim

# The small CPU build of torch (install.sh installs torch first, pinned; see FIELD-NOTES).
ARG TORCH_SPEC=torch==2.13.0+cpu
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# 1 adds vLLM's CPU build in /app/.venv-vllm (about 3.5 GB more; serves several users at once much faster)
ARG VLLM=0

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    ARENA_HOST=0.0.0.0 \
    ARENA_PORT=7860 \
    ARENA_LOG_DIR=/data/logs \
    ARENA_CACHE_DIR=/data/cache

WORKDIR /app
COPY . /app
# A prebuilt llama-server at .llama.cpp/bin is kept by install.sh; the C modules sit beside their
# sources, where the editable install finds them.
COPY --from=native /out/ /app/

RUN TORCH_SPEC="$TORCH_SPEC" PIP_EXTRA_INDEX_URL="$PIP_EXTRA_INDEX_URL" VLLM="$VLLM" LLAMACPP=0 bash scripts/install.sh \
 && APP_USER=arena APP_UID=1000 DATA_DIR=/data bash scripts/docker-setup.sh

USER arena
VOLUME ["/data"]
EXPOSE 7860
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["python", "scripts/healthcheck.py"]
CMD ["python", "app.py"]
