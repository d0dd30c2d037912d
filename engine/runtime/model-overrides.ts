// A native model seen through a layer of the runtime (observed for feedback, guarded for batch
// re-plans, falling back to the CPU, short steps inline): the named members replaced, every other
// member the model's own (methods bound to it, properties read and written on it).
import type { NativeModel } from '../native/model';

export function withOverrides<E extends object>(model: NativeModel, overrides: Partial<NativeModel> & E): NativeModel & E {
  return new Proxy(model, {
    get: (target, prop) => {
      if (Object.prototype.hasOwnProperty.call(overrides, prop)) return (overrides as Record<string | symbol, unknown>)[prop];
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
    set: (target, prop, value) => Reflect.set(target, prop, value, target),
  }) as NativeModel & E;
}
