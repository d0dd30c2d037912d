#!/usr/bin/env bash
# Sets up everything Fulcrum needs on a fresh Debian machine: system packages (compilers,
# Chromium and ripgrep for the browser test tiers), npm packages, the native addon, the bundles,
# and code-server for the offline VS Code end-to-end test. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SHARED="${FULCRUM_SHARED:-$ROOT/../shared}"

# 1. Debian packages (needs root; skipped when they are all present or SKIP_APT=1).
need=()
for cmd_pkg in g++:build-essential make:build-essential python3:python3 chromium:chromium rg:ripgrep; do
  command -v "${cmd_pkg%%:*}" >/dev/null 2>&1 || need+=("${cmd_pkg##*:}")
done
[ -f /usr/include/gssapi/gssapi.h ] || need+=(libkrb5-dev)
# Vulkan: headers and glslc to build the GPU backend's shaders; lavapipe (a Vulkan driver on the
# CPU) and the Khronos validation layer to test it (GPU.md).
command -v glslc >/dev/null 2>&1 || need+=(glslc spirv-tools)
[ -f /usr/include/vulkan/vulkan.h ] || need+=(libvulkan-dev)
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need+=(mesa-vulkan-drivers)
[ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] || need+=(vulkan-validationlayers)
command -v vulkaninfo >/dev/null 2>&1 || need+=(vulkan-tools)
if [ "${#need[@]}" -gt 0 ] && [ "${SKIP_APT:-0}" != 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "setup: missing Debian packages (${need[*]}); run as root or install them" >&2
  fi
fi

# 2. npm packages, exactly as locked. onnxruntime-node's CUDA download is skipped through its
# environment variable (not .npmrc: npm warns about unknown keys there on every npm/npx call).
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error

# 3. Native addon (node-gyp against the local Node headers; no download) and the bundles.
npm run --silent build

# 4. code-server (a real VS Code 1.100 server) for the end-to-end tier, from the npm registry.
CS_DIR="$ROOT/.vscode-e2e/code-server"
if [ ! -x "$CS_DIR/node_modules/.bin/code-server" ]; then
  if [ -f "$SHARED/tools/install-code-server.sh" ]; then
    SKIP_APT=1 bash "$SHARED/tools/install-code-server.sh" "$CS_DIR"
  else
    echo "setup: $SHARED/tools/install-code-server.sh not found; the VS Code end-to-end tier will be skipped"
  fi
fi
echo "setup: done"
