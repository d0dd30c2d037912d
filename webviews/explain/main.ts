// Entry of the explanation panel (dist/webviews/explain.js): the extension sends fulcrum/explain's plan.
import '../shared/base.css';
import './explain.css';
import type { Plan } from '../../engine/server/protocol';
import { startView } from '../shared/boot';
import { renderExplain } from './render';

startView<Plan>((root, plan) => renderExplain(root, plan));
