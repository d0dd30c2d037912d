// Reading benchmark options from JS objects with clear errors ("bench.memoryRead: runs must be
// an integer in [1, 1000], got 0"), so bad input from the engine never reaches a kernel.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum {
namespace bench {

inline double js_number(const Napi::Object& o, const char* fn, const char* key, double fallback, double min,
                        double max, bool integer) {
  Napi::Value v = o.Get(key);
  const std::string where = std::string(fn) + ": " + key;
  if (v.IsUndefined()) {
    // A fallback outside the range marks the option as required.
    if (fallback >= min && fallback <= max) return fallback;
    throw Napi::TypeError::New(o.Env(), where + " is required");
  }
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), where + " must be a number");
  const double x = v.As<Napi::Number>().DoubleValue();
  if (!(x >= min && x <= max) || (integer && x != static_cast<double>(static_cast<int64_t>(x)))) {
    throw Napi::RangeError::New(o.Env(), where + " must be " + (integer ? "an integer" : "a number") + " in [" +
                                              std::to_string(static_cast<int64_t>(min)) + ", " +
                                              std::to_string(static_cast<int64_t>(max)) + "], got " +
                                              std::to_string(x));
  }
  return x;
}

inline bool js_bool(const Napi::Object& o, const char* fn, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return fallback;
  if (!v.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": " + key + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

inline std::vector<int> js_int_list(const Napi::Object& o, const char* fn, const char* key, int min, int max) {
  Napi::Value v = o.Get(key);
  const std::string where = std::string(fn) + ": " + key;
  if (!v.IsArray()) throw Napi::TypeError::New(o.Env(), where + " must be an array of integers");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() == 0 || a.Length() > 64) throw Napi::RangeError::New(o.Env(), where + " must hold 1 to 64 entries");
  std::vector<int> out;
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    const double x = e.IsNumber() ? e.As<Napi::Number>().DoubleValue() : -1e300;
    if (!(x >= min && x <= max) || x != static_cast<double>(static_cast<int64_t>(x))) {
      throw Napi::RangeError::New(o.Env(), where + "[" + std::to_string(i) + "] must be an integer in [" +
                                                std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    out.push_back(static_cast<int>(x));
  }
  return out;
}

inline Napi::Object js_options(const Napi::CallbackInfo& info, const char* fn) {
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(info.Env(), std::string(fn) + ": expects an options object");
  return info[0].As<Napi::Object>();
}

inline Napi::Array js_ns_array(Napi::Env env, const std::vector<int64_t>& ns) {
  Napi::Array a = Napi::Array::New(env, ns.size());
  for (size_t i = 0; i < ns.size(); ++i) a.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(ns[i])));
  return a;
}

// Runs `compute` on a libuv worker thread (so a benchmark never blocks the engine's event
// loop), then resolves the promise with `to_js(result)`, or rejects with the C++ error text.
template <typename Result, typename Compute, typename ToJs>
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, Compute compute, ToJs to_js)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), compute_(std::move(compute)),
        to_js_(std::move(to_js)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      result_ = compute_();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(to_js_(Env(), result_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Compute compute_;
  ToJs to_js_;
  Result result_{};
};

template <typename Result, typename Compute, typename ToJs>
Napi::Promise run_async(Napi::Env env, Compute compute, ToJs to_js) {
  auto* w = new PromiseWorker<Result, Compute, ToJs>(env, std::move(compute), std::move(to_js));
  Napi::Promise p = w->promise();
  w->Queue();  // the worker deletes itself when done
  return p;
}

}  // namespace bench
}  // namespace fulcrum
