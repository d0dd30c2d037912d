// Entry of the what-if panel (dist/webviews/whatif.js).
import '../shared/base.css';
import '../explain/explain.css';
import './whatif.css';
import { post, startView } from '../shared/boot';
import type { WhatIfViewData } from './types';
import { renderWhatIf } from './render';

startView<WhatIfViewData>((root, data) => renderWhatIf(root, data, (action, args) => post({ type: 'action', action, args })));
