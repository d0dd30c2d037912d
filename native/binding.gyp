{
  "target_defaults": {
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "src"],
    "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags": ["-O3", "-fPIC", "-Wall", "-Wno-unused-function"],
    "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-fPIC", "-pthread"]
  },
  "targets": [
    {
      "target_name": "fulcrum_avx2",
      "type": "static_library",
      "sources": ["<!@(node list-sources.js avx2)"],
      "cflags_cc": ["-mavx2", "-mfma", "-mf16c"]
    },
    {
      "target_name": "fulcrum_avxvnni",
      "type": "static_library",
      "sources": ["<!@(node list-sources.js avxvnni)"],
      "cflags_cc": ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"]
    },
    {
      "target_name": "fulcrum_avx512",
      "type": "static_library",
      "sources": ["<!@(node list-sources.js avx512)"],
      "cflags_cc": ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mavx512bf16"]
    },
    {
      "target_name": "fulcrum",
      "sources": ["<!@(node list-sources.js base)"],
      "dependencies": ["fulcrum_avx2", "fulcrum_avxvnni", "fulcrum_avx512"],
      "libraries": ["-pthread"]
    }
  ]
}
