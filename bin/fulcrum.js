#!/usr/bin/env node
// `npx fulcrum …`: runs the bundled CLI (built by `npm run build`).
'use strict';
const path = require('path');
const fs = require('fs');
const cli = path.join(__dirname, '..', 'dist', 'cli.js');
if (!fs.existsSync(cli)) {
  process.stderr.write(`fulcrum: ${cli} is missing; run \`npm run build\` first\n`);
  process.exit(2);
}
require(cli);
