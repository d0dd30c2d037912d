// Every request family the server answers, one module each. To add one: write
// handlers/<family>.ts exporting a `HandlerFamily`, put its method names and types in
// ../protocol.ts, and list it here.
import type { HandlerFamily } from '../context';
import { registerCompletionHandlers } from './completion';
import { registerHttpHandlers } from './http';
import { registerMeasureHandler, registerModelHandlers } from './model';
import { registerPlanHandlers } from './plan';
import { registerProfileHandlers } from './profile';

export const handlerFamilies: readonly HandlerFamily[] = [
  registerModelHandlers,
  registerMeasureHandler,
  registerCompletionHandlers,
  registerPlanHandlers,
  registerProfileHandlers,
  registerHttpHandlers,
];
