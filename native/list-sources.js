// Lists the addon's C++ sources for binding.gyp, by ISA: files named *_avx2.cc are compiled
// with AVX2/FMA/F16C enabled, *_avx512.cc with AVX-512 (F/BW/VL/DQ/VNNI/BF16), everything else
// for baseline x86-64. Run-time dispatch (ggml_types.h) picks among them.
'use strict';
const fs = require('fs');
const path = require('path');
const kind = process.argv[2] || 'base';
const root = path.join(__dirname, 'src');
const out = [];
(function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.cc')) {
      const isa = e.name.endsWith('_avx2.cc') ? 'avx2' : e.name.endsWith('_avx512.cc') ? 'avx512' : 'base';
      if (isa === kind) out.push(path.relative(__dirname, p).split(path.sep).join('/'));
    }
  }
})(root);
out.sort();
process.stdout.write(out.join(' '));
