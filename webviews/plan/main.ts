// Entry of the plan panel (bundled to dist/webviews/plan.js): the extension sends a PlanViewData
// (fulcrum/plan's result, plus measured per-op times when the runtime has them).
import '../shared/base.css';
import './plan.css';
import type { PlanViewData } from '../../engine/server/protocol';
import { post, startView } from '../shared/boot';
import { renderPlan } from './render';

startView<PlanViewData>((root, data) => renderPlan(root, data, (action, args) => post({ type: 'action', action, ...(args ? { args } : {}) })));
