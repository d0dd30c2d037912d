// Lists the addon's C++ sources for binding.gyp, by ISA: files named *_avx2.cc are compiled
// with AVX2/FMA/F16C enabled, *_avx512.cc with AVX-512 (F/BW/VL/DQ/VNNI/BF16), everything else
// for baseline x86-64. The block formats' AVX2 files (src/quant/**/*_avx2.cc) are listed a second
// time as `avxvnni`, compiled with AVX-VNNI as well (core/isa.h). Run-time dispatch picks among them.
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
      const rel = path.relative(__dirname, p).split(path.sep).join('/');
      if (isa === kind || (kind === 'avxvnni' && isa === 'avx2' && rel.startsWith('src/quant/'))) out.push(rel);
    }
  }
})(root);
out.sort();
process.stdout.write(out.join(' '));
