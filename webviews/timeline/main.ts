// Entry of the timeline panel (bundled to dist/webviews/timeline.js): the extension sends the
// simulator's Chrome trace (fulcrum/simulate with trace: true), and a measured one when it has one.
import '../shared/base.css';
import './timeline.css';
import type { TimelineViewData } from '../../engine/server/protocol';
import { post, startView } from '../shared/boot';
import { renderTimeline } from './render';

startView<TimelineViewData>((root, data) => renderTimeline(root, data, (action, args) => post({ type: 'action', action, ...(args ? { args } : {}) })));
