// JS binding of the model: `new Model(path, tensors, config)` with eval / evalAsync / clearKv /
// dispose. evalAsync runs the forward pass on a libuv worker thread (Napi::AsyncWorker) so the
// event loop stays free; one eval at a time per model (a second is rejected, not queued, so
// callers see their own sequencing bugs). Every failure becomes a JS Error.
#include <cmath>
#include <cstring>
#include <napi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "addon_registry.h"
#include "model/model.h"

namespace fulcrum {
namespace {

struct Shared {
  std::unique_ptr<Model> model;
  std::atomic<bool> busy{false};
  // evalAsync / evalBatchAsync into the caller's arrays: the worker writes the logits here (kept
  // and reused, so its pages stay mapped), and the JS thread copies them into those arrays when
  // the evaluation is done: a JS array may not be touched off the JS thread, and its buffer could
  // be detached while the worker runs.
  std::vector<float> staged_logits;
};

int64_t get_int(const Napi::Object& o, const char* key, bool required, int64_t fallback = 0) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) {
    if (required) throw Napi::TypeError::New(o.Env(), std::string("model config: '") + key + "' is required");
    return fallback;
  }
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("model config: '") + key + "' must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  // Range-check before casting: converting an out-of-range double (1e300, inf, NaN) is UB.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != std::floor(d))
    throw Napi::TypeError::New(o.Env(), std::string("model config: '") + key + "' must be an integer, got " + std::to_string(d));
  return static_cast<int64_t>(d);
}

double get_num(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string("model config: '") + key + "' must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

ModelConfig parse_config(const Napi::Object& o) {
  ModelConfig c;
  Napi::Value arch = o.Get("arch");
  if (!arch.IsString()) throw Napi::TypeError::New(o.Env(), "model config: 'arch' must be a string");
  c.arch = arch.As<Napi::String>().Utf8Value();
  c.n_layers = get_int(o, "nLayers", true);
  c.n_embd = get_int(o, "nEmbd", true);
  c.n_heads = get_int(o, "nHeads", true);
  c.n_kv_heads = get_int(o, "nKvHeads", true);
  c.head_dim = get_int(o, "headDim", true);
  c.n_ff = get_int(o, "nFf", true);
  c.n_vocab = get_int(o, "nVocab", true);
  c.context_length = get_int(o, "contextLength", true);
  c.batch_size = get_int(o, "batchSize", false, 512);
  c.threads = static_cast<int>(get_int(o, "threads", false, 1));
  c.memory_limit_bytes = static_cast<uint64_t>(std::max<int64_t>(0, get_int(o, "memoryLimitBytes", false, 0)));
  c.kv_page_tokens = get_int(o, "kvPageTokens", false, KvCache::kPageTokens);
  Napi::Value kv_format = o.Get("kvFormat");
  if (!kv_format.IsUndefined() && !kv_format.IsNull()) {
    const std::string f = kv_format.IsString() ? kv_format.As<Napi::String>().Utf8Value() : "(not a string)";
    if (f == "F16") c.kv_format = KvFormat::F16;
    else if (f == "Q8_0") c.kv_format = KvFormat::Q8_0;
    else throw Napi::TypeError::New(o.Env(), "model config: 'kvFormat' must be 'F16' or 'Q8_0', got '" + f + "'");
  }
  c.max_sequences = get_int(o, "maxSequences", false, 1);
  c.n_expert = get_int(o, "nExpert", false, 0);
  c.n_expert_used = get_int(o, "nExpertUsed", false, 0);
  c.norm_eps = static_cast<float>(get_num(o, "normEps", 1e-5));
  c.rope.freq_base = static_cast<float>(get_num(o, "ropeFreqBase", 10000.0));
  c.rope.freq_scale = static_cast<float>(get_num(o, "ropeFreqScale", 1.0));
  c.rope.n_rot = get_int(o, "nRot", false, c.head_dim);
  Napi::Value style = o.Get("ropeStyle");
  const std::string s = style.IsString() ? style.As<Napi::String>().Utf8Value() : "normal";
  if (s == "normal") c.rope.style = RopeStyle::Normal;
  else if (s == "neox") c.rope.style = RopeStyle::Neox;
  else throw Napi::TypeError::New(o.Env(), "model config: 'ropeStyle' must be 'normal' or 'neox', got '" + s + "'");
  c.attn_scale = static_cast<float>(get_num(o, "attnScale", 0.0));
  c.attn_softcap = static_cast<float>(get_num(o, "attnSoftcap", 0.0));
  c.final_softcap = static_cast<float>(get_num(o, "finalSoftcap", 0.0));
  c.n_swa = get_int(o, "slidingWindow", false, 0);
  c.rope_swa = c.rope;
  c.rope_swa.freq_base = static_cast<float>(get_num(o, "ropeFreqBaseSwa", c.rope.freq_base));
  c.rope_swa.freq_scale = static_cast<float>(get_num(o, "ropeFreqScaleSwa", 1.0));
  Napi::Value swa = o.Get("swaLayers");
  if (swa.IsArray()) {
    Napi::Array a = swa.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) c.swa_layers.push_back(a.Get(i).ToBoolean().Value() ? 1 : 0);
  } else if (!swa.IsUndefined() && !swa.IsNull()) {
    throw Napi::TypeError::New(o.Env(), "model config: 'swaLayers' must be an array of booleans");
  }
  return c;
}

std::vector<TensorEntry> parse_tensors(const Napi::Array& a) {
  std::vector<TensorEntry> out;
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value v = a.Get(i);
    if (!v.IsObject()) throw Napi::TypeError::New(a.Env(), "tensor table: entry " + std::to_string(i) + " is not an object");
    Napi::Object o = v.As<Napi::Object>();
    TensorEntry t;
    Napi::Value name = o.Get("name");
    if (!name.IsString()) throw Napi::TypeError::New(a.Env(), "tensor table: entry " + std::to_string(i) + " has no name");
    t.name = name.As<Napi::String>().Utf8Value();
    const int64_t type = get_int(o, "type", true);
    if (type < 0 || type >= static_cast<int64_t>(GgmlType::COUNT))
      throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': unknown ggml type " + std::to_string(type));
    t.type = static_cast<GgmlType>(type);
    const int64_t off = get_int(o, "offset", true);
    if (off < 0) throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': negative offset");
    t.offset = static_cast<uint64_t>(off);
    Napi::Value dims = o.Get("dims");
    if (!dims.IsArray()) throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': dims must be an array");
    Napi::Array d = dims.As<Napi::Array>();
    if (d.Length() > 4) throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': " + std::to_string(d.Length()) + " dimensions, at most 4");
    for (uint32_t k = 0; k < d.Length(); ++k) {
      Napi::Value dv = d.Get(k);
      if (!dv.IsNumber()) throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': dims must be numbers");
      const int64_t n = dv.As<Napi::Number>().Int64Value();
      if (n < 1 || n > (int64_t{1} << 32)) throw Napi::TypeError::New(a.Env(), "tensor '" + t.name + "': dimension " + std::to_string(n) + " out of range");
      t.dims.push_back(n);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Napi::Float32Array to_js(Napi::Env env, std::vector<float>&& v) {
  auto* heap = new std::vector<float>(std::move(v));
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, heap->data(), heap->size() * sizeof(float),
                                                [](Napi::Env, void*, std::vector<float>* p) { delete p; }, heap);
  return Napi::Float32Array::New(env, heap->size(), ab, 0);
}


// evalBatch inputs, copied off the JS heap (the worker thread cannot touch JS values).
struct BatchInput {
  std::vector<int32_t> seqs;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int64_t> starts;
  std::vector<bool> keep_after;
  std::vector<int32_t> layers, layer_counts;
  std::vector<Model::SeqInput> view() const {
    std::vector<Model::SeqInput> v;
    for (size_t i = 0; i < seqs.size(); ++i)
      v.push_back(Model::SeqInput{seqs[i], tokens[i].data(), static_cast<int64_t>(tokens[i].size()), starts[i], i < keep_after.size() && keep_after[i],
                                  i < layers.size() ? layers[i] : -1, i < layer_counts.size() ? layer_counts[i] : 1});
    return v;
  }
};

Napi::Array to_js_list(Napi::Env env, std::vector<std::vector<float>>&& v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); ++i) a.Set(static_cast<uint32_t>(i), to_js(env, std::move(v[i])));
  return a;
}

// The caller's logits arrays (eval's `out`, evalBatch's `outs`): for each input a Float32Array of
// exactly logits_floats floats, or undefined (a new array is returned for it). Inputs without
// logits (a layer-by-layer call before the last layer) ignore theirs.
struct LogitsOuts {
  std::vector<Napi::ObjectReference> refs;  // empty entries: no array given
  std::vector<int64_t> floats;
  bool given = false;
  const char* who = "";  // the JS method, for errors
};

LogitsOuts logits_outs(Napi::Env env, const Model& m, const BatchInput& in, bool all, const std::vector<Napi::Value>& arrays, const char* who) {
  LogitsOuts o;
  o.given = true;
  o.who = who;
  const std::vector<Model::SeqInput> view = in.view();
  for (size_t k = 0; k < view.size(); ++k) {
    o.floats.push_back(m.logits_floats(view[k], all));
    Napi::Value v = k < arrays.size() ? arrays[k] : env.Undefined();
    if (v.IsUndefined() || o.floats.back() == 0) {
      o.refs.emplace_back();
      continue;
    }
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      throw Napi::TypeError::New(env, std::string(who) + ": the logits array of input " + std::to_string(k) + " must be a Float32Array");
    const size_t len = v.As<Napi::Float32Array>().ElementLength();
    if (static_cast<int64_t>(len) != o.floats.back())
      throw Napi::RangeError::New(env, std::string(who) + ": the logits array of input " + std::to_string(k) + " holds " + std::to_string(len) + " floats, its logits are " +
                                           std::to_string(o.floats.back()) + (all ? " (tokens × nVocab)" : " (nVocab)"));
    o.refs.push_back(Napi::Persistent(v.As<Napi::Object>()));
  }
  return o;
}

// The staged logits of each input, in input order, into the caller's arrays (or new ones); an
// array detached or shrunk while the evaluation ran is an error, not a write past its end.
Napi::Array logits_to_js(Napi::Env env, LogitsOuts& o, const float* staged) {
  Napi::Array a = Napi::Array::New(env, o.floats.size());
  size_t at = 0;
  for (size_t k = 0; k < o.floats.size(); ++k) {
    const size_t n = static_cast<size_t>(o.floats[k]);
    Napi::Float32Array dst;
    if (o.refs[k].IsEmpty()) {
      dst = Napi::Float32Array::New(env, n);
    } else {
      dst = o.refs[k].Value().As<Napi::Float32Array>();
      if (dst.ElementLength() != n || (n > 0 && !dst.Data()))
        throw Napi::Error::New(env, std::string(o.who) + ": the logits array of input " + std::to_string(k) + " was detached or resized while the evaluation ran");
    }
    if (n > 0) std::memcpy(dst.Data(), staged + at, n * sizeof(float));
    at += n;
    a.Set(static_cast<uint32_t>(k), dst);
  }
  return a;
}

// evalAsync and evalBatchAsync on a libuv worker thread. `single`: evalAsync's one sequence,
// resolved with its logits rather than a list.
class EvalBatchWorker : public Napi::AsyncWorker {
 public:
  EvalBatchWorker(Napi::Env env, std::shared_ptr<Shared> shared, BatchInput in, bool all, bool single = false, LogitsOuts outs = {})
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), shared_(std::move(shared)), in_(std::move(in)), all_(all), single_(single),
        outs_(std::move(outs)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      if (!outs_.given) {
        out_ = shared_->model->eval_batch(in_.view(), all_);
        return;
      }
      size_t total = 0;
      for (int64_t f : outs_.floats) total += static_cast<size_t>(f);
      std::vector<float>& staged = shared_->staged_logits;
      if (staged.size() < total) staged.resize(total);
      std::vector<float*> dests;
      size_t at = 0;
      for (int64_t f : outs_.floats) {
        dests.push_back(f > 0 ? staged.data() + at : nullptr);
        at += static_cast<size_t>(f);
      }
      shared_->model->eval_into(in_.view(), all_, dests);
    } catch (const DeviceError& e) {
      device_error_ = true;
      SetError(e.what());
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  // The model stays busy until the result is back on the JS thread, so JS never sees an idle
  // model whose promise has not settled.
  void OnOK() override {
    shared_->busy.store(false);
    if (outs_.given) {
      try {
        Napi::Array a = logits_to_js(Env(), outs_, shared_->staged_logits.data());
        deferred_.Resolve(single_ ? a.Get(0u) : a);
      } catch (const Napi::Error& e) {
        deferred_.Reject(e.Value());
      }
      return;
    }
    if (single_) deferred_.Resolve(to_js(Env(), std::move(out_[0])));
    else deferred_.Resolve(to_js_list(Env(), std::move(out_)));
  }
  void OnError(const Napi::Error& e) override {
    shared_->busy.store(false);
    if (device_error_) e.Set("deviceError", Napi::Boolean::New(Env(), true));
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Shared> shared_;
  BatchInput in_;
  bool all_;
  bool single_;
  bool device_error_ = false;
  std::vector<std::vector<float>> out_;
  LogitsOuts outs_;
};

class ModelWrap : public Napi::ObjectWrap<ModelWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Model",
                       {InstanceMethod("eval", &ModelWrap::Eval), InstanceMethod("evalAsync", &ModelWrap::EvalAsync),
                        InstanceMethod("clearKv", &ModelWrap::ClearKv), InstanceMethod("prepareKv", &ModelWrap::PrepareKv), InstanceMethod("shiftKv", &ModelWrap::ShiftKv), InstanceMethod("dispose", &ModelWrap::Dispose),
                        InstanceMethod("opProfile", &ModelWrap::OpProfile),
                        InstanceMethod("setPlacement", &ModelWrap::SetPlacement),
                        InstanceMethod("evalBatch", &ModelWrap::EvalBatch),
                        InstanceMethod("evalBatchAsync", &ModelWrap::EvalBatchAsync),
                        InstanceMethod("setSequenceKv", &ModelWrap::SetSequenceKv),
                        InstanceMethod("swapSequenceKv", &ModelWrap::SwapSequenceKv),
                        InstanceMethod("sequencePast", &ModelWrap::SequencePast),
                        InstanceAccessor("maxSequences", &ModelWrap::GetMaxSequences, nullptr),
                        InstanceMethod("takeTrace", &ModelWrap::TakeTrace),
                        InstanceMethod("compiledOps", &ModelWrap::CompiledOps),
                        InstanceMethod("placementNotes", &ModelWrap::PlacementNotes),
                        InstanceMethod("failDeviceAfter", &ModelWrap::FailDeviceAfter),
                        InstanceAccessor("deviceStats", &ModelWrap::GetDeviceStats, nullptr),
                        InstanceAccessor("tracing", &ModelWrap::GetTracing, &ModelWrap::SetTracing),
                        InstanceAccessor("profiling", &ModelWrap::GetProfiling, &ModelWrap::SetProfiling),
                        InstanceAccessor("pipelined", &ModelWrap::GetPipelined, &ModelWrap::SetPipelined),
                        InstanceAccessor("layerSteps", &ModelWrap::GetLayerSteps, nullptr),
                        InstanceAccessor("deferredAttention", &ModelWrap::GetDeferredAttention, nullptr),
                        InstanceAccessor("threads", &ModelWrap::GetThreads, &ModelWrap::SetThreads),
                        InstanceAccessor("nPast", &ModelWrap::GetNPast, nullptr),
                        InstanceAccessor("contextLength", &ModelWrap::GetContext, nullptr),
                        InstanceAccessor("kvBytes", &ModelWrap::GetKvBytes, nullptr),
                        InstanceAccessor("kvBytesInUse", &ModelWrap::GetKvBytesInUse, nullptr),
                        InstanceAccessor("kvBytesReserved", &ModelWrap::GetKvBytesReserved, nullptr),
                        InstanceAccessor("kvPageTokens", &ModelWrap::GetKvPageTokens, nullptr),
                        InstanceAccessor("kvFormat", &ModelWrap::GetKvFormat, nullptr),
                        InstanceAccessor("disposed", &ModelWrap::GetDisposed, nullptr)});
  }

  explicit ModelWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ModelWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsObject())
      throw Napi::TypeError::New(env, "new Model(path: string, tensors: TensorEntry[], config: object)");
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    std::vector<TensorEntry> tensors = parse_tensors(info[1].As<Napi::Array>());
    ModelConfig cfg = parse_config(info[2].As<Napi::Object>());
    shared_ = std::make_shared<Shared>();
    try {
      shared_->model = std::make_unique<Model>(path, tensors, cfg);
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, e.what());
    }
  }

 private:
  Shared& acquire(Napi::Env env) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(env, "model: already disposed");
    bool expected = false;
    if (!shared_->busy.compare_exchange_strong(expected, true))
      throw Napi::Error::New(env, "model: an evaluation is already running on this model");
    return *shared_;
  }

  // Runs fn on the model acquire() took and releases it however fn ends; a C++ error becomes a JS
  // error (a device's with deviceError set, so the engine falls back to the CPU).
  template <class F>
  static auto held(Napi::Env env, Shared& s, F&& fn) -> decltype(fn()) {
    struct Release {
      Shared& s;
      ~Release() { s.busy.store(false); }
    } release{s};
    try {
      return fn();
    } catch (const Napi::Error&) {
      throw;
    } catch (const DeviceError& e) {
      throw device_error(env, e.what());
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, e.what());
    }
  }

  static std::vector<int32_t> tokens_arg(const Napi::CallbackInfo& info) {
    if (info.Length() < 2 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array || !info[1].IsNumber())
      throw Napi::TypeError::New(info.Env(), "eval(tokens: Int32Array, startPos: number, wantAllLogits?: boolean)");
    Napi::Int32Array a = info[0].As<Napi::Int32Array>();
    return std::vector<int32_t>(a.Data(), a.Data() + a.ElementLength());
  }

  static int64_t pos_arg(const Napi::CallbackInfo& info) {
    const double d = info[1].As<Napi::Number>().DoubleValue();
    if (!(d >= 0 && d < 9223372036854775808.0) || d != std::floor(d))
      throw Napi::RangeError::New(info.Env(), "eval: startPos must be a non-negative integer");
    return static_cast<int64_t>(d);
  }

  Napi::Value Eval(const Napi::CallbackInfo& info) {
    std::vector<int32_t> tokens = tokens_arg(info);
    const int64_t start = pos_arg(info);
    const bool all = info.Length() > 2 && info[2].ToBoolean().Value();
    Shared& s = acquire(info.Env());
    if (info.Length() > 3 && !info[3].IsUndefined()) {
      BatchInput in = single_input(std::move(tokens), start);
      return eval_sync(info.Env(), s, in, all, {info[3]}, "eval").Get(0u);
    }
    std::vector<float> out = held(info.Env(), s, [&] { return s.model->eval(tokens.data(), static_cast<int64_t>(tokens.size()), start, all); });
    return to_js(info.Env(), std::move(out));
  }

  Napi::Value EvalAsync(const Napi::CallbackInfo& info) {
    std::vector<int32_t> tokens = tokens_arg(info);
    const int64_t start = pos_arg(info);
    const bool all = info.Length() > 2 && info[2].ToBoolean().Value();
    Shared& s = acquire(info.Env());
    BatchInput in = single_input(std::move(tokens), start);
    LogitsOuts outs;
    if (info.Length() > 3 && !info[3].IsUndefined()) outs = outs_or_release(info.Env(), s, in, all, {info[3]}, "evalAsync");
    auto* w = new EvalBatchWorker(info.Env(), shared_, std::move(in), all, true, std::move(outs));
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  }

  Napi::Value ClearKv(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "clearKv(fromPos: number)");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] { s.model->clear_kv(info[0].As<Napi::Number>().Int64Value(), info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0); });
    return info.Env().Undefined();
  }

  // prepareKv(positions, seq?): see Model::prepare_kv.
  Napi::Value PrepareKv(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || !info[0].IsNumber() || (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsNumber()))
      throw Napi::TypeError::New(info.Env(), "prepareKv(positions: number, seq?: number)");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] { s.model->prepare_kv(info[0].As<Napi::Number>().Int64Value(), info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0); });
    return info.Env().Undefined();
  }

  // shiftKv(from, to, delta, seq?): see Model::shift_kv.
  Napi::Value ShiftKv(const Napi::CallbackInfo& info) {
    if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber())
      throw Napi::TypeError::New(info.Env(), "shiftKv(from: number, to: number, delta: number, seq?: number)");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] {
      s.model->shift_kv(info[0].As<Napi::Number>().Int64Value(), info[1].As<Napi::Number>().Int64Value(), info[2].As<Napi::Number>().Int64Value(),
                        info.Length() > 3 && info[3].IsNumber() ? info[3].As<Napi::Number>().Int32Value() : 0);
    });
    return info.Env().Undefined();
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    // A running evalAsync holds its own reference; the model is freed when it finishes.
    if (shared_ && !shared_->busy.load()) shared_->model.reset();
    shared_.reset();
    return info.Env().Undefined();
  }

  Napi::Value GetThreads(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), shared_->model->threads());
  }
  void SetThreads(const Napi::CallbackInfo& info, const Napi::Value& v) {
    if (!v.IsNumber()) throw Napi::TypeError::New(info.Env(), "threads must be a number");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] { s.model->set_threads(static_cast<int>(v.As<Napi::Number>().Int32Value())); });
  }
  Napi::Value GetNPast(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->n_past()));
  }
  Napi::Value GetContext(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->config().context_length));
  }
  Napi::Value GetKvBytes(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->kv_bytes()));
  }
  // Page counts are atomics: these may be read while evalAsync runs.
  Napi::Value GetKvBytesInUse(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->kv_bytes_in_use()));
  }
  Napi::Value GetKvBytesReserved(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->kv_bytes_reserved()));
  }
  Napi::Value GetKvFormat(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::String::New(info.Env(), kv_format_name(shared_->model->config().kv_format));
  }
  Napi::Value GetKvPageTokens(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Number::New(info.Env(), static_cast<double>(shared_->model->config().kv_page_tokens));
  }
  // opProfile() -> [{kind, layer, weight?, ns, calls}] accumulated since profiling was switched on.
  Napi::Value OpProfile(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    if (shared_->busy.load()) throw Napi::Error::New(info.Env(), "model: an evaluation is running");
    Napi::Array out = Napi::Array::New(info.Env());
    uint32_t i = 0;
    for (const Model::OpTiming& t : shared_->model->op_timings()) {
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("kind", t.kind);
      o.Set("layer", t.layer);
      if (t.weight) o.Set("weight", t.weight);
      o.Set("ns", static_cast<double>(t.ns));
      o.Set("calls", static_cast<double>(t.calls));
      out.Set(i++, o);
    }
    return out;
  }
  Napi::Value GetProfiling(const Napi::CallbackInfo& info) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(info.Env(), "model: already disposed");
    return Napi::Boolean::New(info.Env(), shared_->model->profiling());
  }
  void SetProfiling(const Napi::CallbackInfo& info, const Napi::Value& v) {
    Shared& s = acquire(info.Env());
    s.model->set_profiling(v.ToBoolean().Value());
    s.busy.store(false);
  }
  Napi::Value GetPipelined(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), model(info.Env()).pipelined()); }
  Napi::Value GetLayerSteps(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), model(info.Env()).layer_steps_ready()); }
  Napi::Value GetDeferredAttention(const Napi::CallbackInfo& info) {
    const DeferredAttention& d = model(info.Env()).deferred_attention();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("started", static_cast<double>(d.started()));
    o.Set("runNs", static_cast<double>(d.run_ns()));
    o.Set("waitNs", static_cast<double>(d.wait_ns()));
    return o;
  }
  // Takes the model like the other setters: a step running on a worker reads the flag.
  void SetPipelined(const Napi::CallbackInfo& info, const Napi::Value& v) {
    Shared& s = acquire(info.Env());
    s.model->set_pipelined(v.ToBoolean().Value());
    s.busy.store(false);
  }
  Napi::Value GetDisposed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !shared_); }

  Model& model(Napi::Env env) {
    if (!shared_ || !shared_->model) throw Napi::Error::New(env, "model: already disposed");
    return *shared_->model;
  }

  // setPlacement(placement | null, device | null, prefill? {placement, rows}): see
  // engine/native/model.ts (NativePlacement).
  Napi::Value SetPlacement(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Placement p;
    std::unique_ptr<Device> dev;
    if (info.Length() > 0 && info[0].IsObject()) p = parse_placement(info[0].As<Napi::Object>(), model(env).config().n_layers);
    Placement prefill;
    int64_t prefill_rows = 0;
    const bool has_prefill = info.Length() > 2 && info[2].IsObject();
    if (has_prefill) {
      Napi::Object pf = info[2].As<Napi::Object>();
      Napi::Value pp = pf.Get("placement");
      if (!pp.IsObject()) throw Napi::TypeError::New(env, "setPlacement: prefill.placement must be a placement");
      prefill = parse_placement(pp.As<Napi::Object>(), model(env).config().n_layers);
      prefill_rows = get_int(pf, "rows", true);
    }
    if (info.Length() > 1 && info[1].IsObject()) {
      Napi::Object d = info[1].As<Napi::Object>();
      Napi::Value kind = d.Get("kind");
      const std::string k = kind.IsString() ? kind.As<Napi::String>().Utf8Value() : "";
      try {
        if (k == "loopback") {
          LoopbackOptions o;
          o.capacity_bytes = static_cast<uint64_t>(std::max<int64_t>(0, get_int(d, "capacityBytes", true)));
          o.link_bytes_per_s = get_num(d, "linkBytesPerSecond", 0);
          o.link_latency_s = get_num(d, "linkLatencySeconds", 0);
          o.threads = static_cast<int>(get_int(d, "threads", false, 1));
          dev = make_loopback_device(o);
        } else if (k == "vulkan") {
          VulkanDeviceOptions o;
          o.budget_bytes = static_cast<uint64_t>(std::max<int64_t>(0, get_int(d, "capacityBytes", false, 0)));
          dev = make_vulkan_device(o);
        } else {
          throw Napi::TypeError::New(env, "setPlacement: device.kind must be 'loopback' or 'vulkan', got '" + k + "'");
        }
      } catch (const DeviceError& e) {
        throw device_error(env, e.what());
      }
    }
    Shared& s = acquire(env);
    held(env, s, [&] {
      if (has_prefill) s.model->set_placements(p, &prefill, prefill_rows, std::move(dev));
      else s.model->set_placement(p, std::move(dev));
      // The pipelined program now, not at its first step: compiledOps() (which traces are read
      // against, and which the engine keeps) then lists it from the start.
      // The layer-by-layer program beside it (APEX's asynchronous overlap runs on NEO's
      // placement), where the placement allows it (layerSteps).
      if (s.model->build_pipelined()) s.model->build_layer_steps();
    });
    return env.Undefined();
  }

  static Napi::Error device_error(Napi::Env env, const std::string& what) {
    Napi::Error e = Napi::Error::New(env, what);
    e.Set("deviceError", Napi::Boolean::New(env, true));
    return e;
  }

  static Loc parse_loc(Napi::Env env, const Napi::Value& v, const std::string& where) {
    const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "host";
    if (s == "host" || s == "cpu") return Loc::Host;
    if (s == "device" || s == "gpu") return Loc::Dev;
    throw Napi::TypeError::New(env, "placement: " + where + " must be 'host' or 'device', got '" + s + "'");
  }

  static OpPlacement parse_op(Napi::Env env, const Napi::Object& o, const std::string& where) {
    OpPlacement p;
    p.loc = parse_loc(env, o.Get("loc"), where + ".loc");
    p.dev_fraction = get_num(o, "deviceFraction", 1.0);
    Napi::Value w = o.Get("weights");
    const std::string ws = w.IsString() ? w.As<Napi::String>().Utf8Value() : (p.loc == Loc::Dev ? "resident" : "host");
    if (ws == "host") p.weights = p.loc == Loc::Dev ? WeightHome::Streamed : WeightHome::Host;
    else if (ws == "resident") p.weights = WeightHome::Resident;
    else if (ws == "streamed") p.weights = WeightHome::Streamed;
    else throw Napi::TypeError::New(env, "placement: " + where + ".weights must be 'host', 'resident' or 'streamed', got '" + ws + "'");
    return p;
  }

  static Placement parse_placement(const Napi::Object& o, int64_t n_layers) {
    Napi::Env env = o.Env();
    Placement p;
    Napi::Value layers = o.Get("layers");
    if (!layers.IsArray()) throw Napi::TypeError::New(env, "placement: 'layers' must be an array");
    Napi::Array a = layers.As<Napi::Array>();
    if (static_cast<int64_t>(a.Length()) != n_layers)
      throw Napi::TypeError::New(env, "placement: " + std::to_string(a.Length()) + " layers given, the model has " + std::to_string(n_layers));
    for (uint32_t i = 0; i < a.Length(); ++i) {
      const std::string where = "layers[" + std::to_string(i) + "]";
      if (!a.Get(i).IsObject()) throw Napi::TypeError::New(env, "placement: " + where + " is not an object");
      Napi::Object lo = a.Get(i).As<Napi::Object>();
      LayerPlacement lp;
      Napi::Value ops = lo.Get("ops");
      if (!ops.IsObject()) throw Napi::TypeError::New(env, "placement: " + where + ".ops must be an object");
      Napi::Object oo = ops.As<Napi::Object>();
      for (int k = 0; k < kPlanOps; ++k) {
        Napi::Value v = oo.Get(plan_op_name(k));
        if (v.IsUndefined()) continue;
        if (!v.IsObject()) throw Napi::TypeError::New(env, "placement: " + where + ".ops." + plan_op_name(k) + " is not an object");
        lp.op[k] = parse_op(env, v.As<Napi::Object>(), where + ".ops." + plan_op_name(k));
      }
      lp.kv = parse_loc(env, lo.Get("kv"), where + ".kv");
      lp.recompute_prefix = get_int(lo, "recomputePrefix", false, 0);
      lp.kv_by_sequence = lo.Get("kvBySequence").ToBoolean().Value();
      p.layers.push_back(lp);
    }
    Napi::Value head = o.Get("head");
    if (head.IsObject()) p.head = parse_op(env, head.As<Napi::Object>(), "head");
    return p;
  }

  Napi::Value GetDeviceStats(const Napi::CallbackInfo& info) {
    Model& m = model(info.Env());
    Device* d = m.device();
    if (!d) return info.Env().Null();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("name", d->info().name);
    o.Set("capacityBytes", static_cast<double>(d->info().capacity_bytes));
    o.Set("bytesInUse", static_cast<double>(d->bytes_in_use()));
    o.Set("peakBytes", static_cast<double>(d->peak_bytes()));
    return o;
  }

  Napi::Value GetTracing(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), model(info.Env()).trace().size() > 0 || tracing_); }
  void SetTracing(const Napi::CallbackInfo& info, const Napi::Value& v) {
    Shared& s = acquire(info.Env());
    tracing_ = v.ToBoolean().Value();
    s.model->set_tracing(tracing_);
    s.busy.store(false);
  }

  // compiledOps() -> [{kind, lane, layer, planOp, weight?, loc}] of the compiled op list.
  Napi::Value PlacementNotes(const Napi::CallbackInfo& info) {
    const std::vector<std::string>& notes = model(info.Env()).placement_notes();
    Napi::Array a = Napi::Array::New(info.Env(), notes.size());
    for (size_t i = 0; i < notes.size(); ++i) a.Set(static_cast<uint32_t>(i), notes[i]);
    return a;
  }

  Napi::Value CompiledOps(const Napi::CallbackInfo& info) {
    Model& m = model(info.Env());
    Napi::Array out = Napi::Array::New(info.Env());
    for (size_t i = 0; i < m.op_count(); ++i) {
      const Model::OpInfo oi = m.op_info(static_cast<int32_t>(i));
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("kind", oi.kind);
      o.Set("lane", oi.lane);
      o.Set("layer", oi.layer);
      o.Set("planOp", oi.plan_op);
      if (oi.weight) o.Set("weight", oi.weight);
      o.Set("loc", oi.loc);
      o.Set("stage", oi.stage);
      if (oi.part) o.Set("batch", oi.part - 1);
      if (oi.gemv_group > 0) o.Set("gemvGroup", oi.gemv_group);
      Napi::Array deps = Napi::Array::New(info.Env(), kLanes);
      for (int l = 0; l < kLanes; ++l) deps.Set(static_cast<uint32_t>(l), oi.deps.dep[l]);
      o.Set("deps", deps);
      out.Set(static_cast<uint32_t>(i), o);
    }
    return out;
  }

  // takeTrace() -> Float64Array of [step, op, startNs, endNs] quadruples; clears the trace.
  Napi::Value TakeTrace(const Napi::CallbackInfo& info) {
    Shared& s = acquire(info.Env());
    const std::vector<TraceEvent>& t = s.model->trace();
    Napi::Float64Array a = Napi::Float64Array::New(info.Env(), t.size() * 4);
    for (size_t i = 0; i < t.size(); ++i) {
      a[i * 4] = static_cast<double>(t[i].step);
      a[i * 4 + 1] = t[i].op;
      a[i * 4 + 2] = static_cast<double>(t[i].start_ns);
      a[i * 4 + 3] = static_cast<double>(t[i].end_ns);
    }
    s.model->clear_trace();
    s.busy.store(false);
    return a;
  }

  Napi::Value FailDeviceAfter(const Napi::CallbackInfo& info) {
    Model& m = model(info.Env());
    if (!m.device()) throw Napi::Error::New(info.Env(), "failDeviceAfter: the model has no device");
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "failDeviceAfter(operations: number)");
    m.device()->fail_after(info[0].As<Napi::Number>().Int64Value());
    return info.Env().Undefined();
  }

  bool tracing_ = false;

  static BatchInput single_input(std::vector<int32_t> tokens, int64_t start) {
    BatchInput in;
    in.seqs.push_back(0);
    in.tokens.push_back(std::move(tokens));
    in.starts.push_back(start);
    return in;
  }

  // evalBatch's third argument: one entry (Float32Array or undefined) per input.
  static std::vector<Napi::Value> outs_arg(const Napi::CallbackInfo& info, const char* who, size_t n) {
    if (!info[2].IsArray()) throw Napi::TypeError::New(info.Env(), std::string(who) + ": outs must be an array (a Float32Array or undefined per input)");
    Napi::Array a = info[2].As<Napi::Array>();
    if (a.Length() != n)
      throw Napi::RangeError::New(info.Env(), std::string(who) + ": " + std::to_string(a.Length()) + " logits arrays for " + std::to_string(n) + " inputs");
    std::vector<Napi::Value> v;
    for (uint32_t k = 0; k < a.Length(); ++k) v.push_back(a.Get(k));
    return v;
  }

  // The outputs checked while the model is held: a bad one releases it before throwing.
  static LogitsOuts outs_or_release(Napi::Env env, Shared& s, const BatchInput& in, bool all, const std::vector<Napi::Value>& arrays, const char* who) {
    try {
      return logits_outs(env, *s.model, in, all, arrays, who);
    } catch (...) {
      s.busy.store(false);  // the evaluation will not run: nothing else releases the model
      throw;
    }
  }

  // eval / evalBatch into the caller's arrays, on this thread: the model writes into them directly
  // (no JS runs meanwhile), and arrays are made for inputs that gave none.
  static Napi::Array eval_sync(Napi::Env env, Shared& s, const BatchInput& in, bool all, const std::vector<Napi::Value>& arrays, const char* who) {
    LogitsOuts outs = outs_or_release(env, s, in, all, arrays, who);
    return held(env, s, [&] {
      Napi::Array result = Napi::Array::New(env, outs.floats.size());
      std::vector<float*> dests;
      for (size_t k = 0; k < outs.floats.size(); ++k) {
        Napi::Float32Array a = outs.refs[k].IsEmpty() ? Napi::Float32Array::New(env, static_cast<size_t>(outs.floats[k])) : outs.refs[k].Value().As<Napi::Float32Array>();
        result.Set(static_cast<uint32_t>(k), a);
        dests.push_back(outs.floats[k] > 0 ? a.Data() : nullptr);
      }
      s.model->eval_into(in.view(), all, dests);
      return result;
    });
  }

  static BatchInput batch_arg(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "evalBatch(inputs: {seq, tokens: Int32Array, startPos}[], wantAllLogits?: boolean)");
    Napi::Array a = info[0].As<Napi::Array>();
    BatchInput in;
    for (uint32_t i = 0; i < a.Length(); ++i) {
      if (!a.Get(i).IsObject()) throw Napi::TypeError::New(env, "evalBatch: input " + std::to_string(i) + " is not an object");
      Napi::Object o = a.Get(i).As<Napi::Object>();
      Napi::Value t = o.Get("tokens");
      if (!t.IsTypedArray() || t.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        throw Napi::TypeError::New(env, "evalBatch: input " + std::to_string(i) + ".tokens must be an Int32Array");
      Napi::Int32Array ta = t.As<Napi::Int32Array>();
      in.tokens.emplace_back(ta.Data(), ta.Data() + ta.ElementLength());
      in.seqs.push_back(static_cast<int32_t>(get_int(o, "seq", true)));
      in.starts.push_back(get_int(o, "startPos", true));
      in.keep_after.push_back(o.Has("keepAfter") && o.Get("keepAfter").ToBoolean().Value());
      const int64_t layer = get_int(o, "layer", false, -1);
      if (layer < -1 || layer > INT32_MAX) throw Napi::RangeError::New(env, "evalBatch: input " + std::to_string(i) + ".layer " + std::to_string(layer) + " is not a layer index");
      in.layers.push_back(static_cast<int32_t>(layer));
      const int64_t count = get_int(o, "layers", false, 1);
      if (count < 1 || count > INT32_MAX) throw Napi::RangeError::New(env, "evalBatch: input " + std::to_string(i) + ".layers " + std::to_string(count) + " must be at least 1");
      in.layer_counts.push_back(static_cast<int32_t>(count));
    }
    return in;
  }

  Napi::Value EvalBatch(const Napi::CallbackInfo& info) {
    BatchInput in = batch_arg(info);
    const bool all = info.Length() > 1 && info[1].ToBoolean().Value();
    std::vector<Napi::Value> arrays;
    const bool given = info.Length() > 2 && !info[2].IsUndefined();
    if (given) arrays = outs_arg(info, "evalBatch", in.seqs.size());
    Shared& s = acquire(info.Env());
    if (given) return eval_sync(info.Env(), s, in, all, arrays, "evalBatch");
    std::vector<std::vector<float>> out = held(info.Env(), s, [&] { return s.model->eval_batch(in.view(), all); });
    return to_js_list(info.Env(), std::move(out));
  }

  Napi::Value EvalBatchAsync(const Napi::CallbackInfo& info) {
    BatchInput in = batch_arg(info);
    const bool all = info.Length() > 1 && info[1].ToBoolean().Value();
    std::vector<Napi::Value> arrays;
    const bool given = info.Length() > 2 && !info[2].IsUndefined();
    if (given) arrays = outs_arg(info, "evalBatchAsync", in.seqs.size());
    Shared& s = acquire(info.Env());
    LogitsOuts outs;
    if (given) outs = outs_or_release(info.Env(), s, in, all, arrays, "evalBatchAsync");
    auto* w = new EvalBatchWorker(info.Env(), shared_, std::move(in), all, false, std::move(outs));
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  }

  Napi::Value SetSequenceKv(const Napi::CallbackInfo& info) {
    if (info.Length() < 2 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "setSequenceKv(seq: number, loc: 'host' | 'device')");
    const Loc loc = parse_loc(info.Env(), info[1], "setSequenceKv loc");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] { s.model->set_sequence_kv(info[0].As<Napi::Number>().Int32Value(), loc); });
    return info.Env().Undefined();
  }

  Napi::Value SwapSequenceKv(const Napi::CallbackInfo& info) {
    if (info.Length() < 2 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "swapSequenceKv(seq: number, loc: 'host' | 'device')");
    const Loc loc = parse_loc(info.Env(), info[1], "swapSequenceKv loc");
    Shared& s = acquire(info.Env());
    held(info.Env(), s, [&] { s.model->swap_sequence_kv(info[0].As<Napi::Number>().Int32Value(), loc); });
    return info.Env().Undefined();
  }

  Napi::Value SequencePast(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "sequencePast(seq: number)");
    return Napi::Number::New(info.Env(), static_cast<double>(model(info.Env()).n_past(info[0].As<Napi::Number>().Int32Value())));
  }

  Napi::Value GetMaxSequences(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(model(info.Env()).max_sequences()));
  }

  std::shared_ptr<Shared> shared_;
};

Napi::Value ListDevices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const DeviceListing l = list_devices();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array found = Napi::Array::New(env);
  for (size_t i = 0; i < l.found.size(); ++i) {
    const DeviceInfo& d = l.found[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", d.name);
    o.Set("description", d.description);
    o.Set("emulated", d.emulated);
    o.Set("capacityBytes", static_cast<double>(d.capacity_bytes));
    o.Set("threads", d.threads);
    Napi::Array f = Napi::Array::New(env);
    for (size_t k = 0; k < d.formats.size(); ++k) f.Set(static_cast<uint32_t>(k), d.formats[k]);
    o.Set("formats", f);
    Napi::Array ops = Napi::Array::New(env);
    for (size_t k = 0; k < d.ops.size(); ++k) ops.Set(static_cast<uint32_t>(k), d.ops[k]);
    o.Set("ops", ops);
    Napi::Array kv = Napi::Array::New(env);
    for (size_t k = 0; k < d.kv_formats.size(); ++k) kv.Set(static_cast<uint32_t>(k), d.kv_formats[k]);
    o.Set("kvFormats", kv);
    found.Set(static_cast<uint32_t>(i), o);
  }
  out.Set("found", found);
  Napi::Array un = Napi::Array::New(env);
  for (size_t i = 0; i < l.unavailable.size(); ++i) un.Set(static_cast<uint32_t>(i), l.unavailable[i]);
  out.Set("unavailable", un);
  return out;
}

// opTable() -> the op vocabulary (model/op_table.h): plan ops with the cost-model ops each
// executes, op kinds, lanes, device step rows, KV page positions.
Napi::Value OpTable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array plan_ops = Napi::Array::New(env);
  for (int i = 0; i < kPlanOps; ++i) {
    const PlanOpEntry& e = plan_op_entry(i);
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", e.name);
    o.Set("matmul", e.matmul);
    Napi::Array covers = Napi::Array::New(env);
    uint32_t n = 0;
    for (const char* const* c = e.covers; *c; ++c) covers.Set(n++, *c);
    o.Set("covers", covers);
    plan_ops.Set(static_cast<uint32_t>(i), o);
  }
  out.Set("planOps", plan_ops);
  Napi::Array kinds = Napi::Array::New(env);
  for (int k = 0; k < op_kind_count(); ++k) kinds.Set(static_cast<uint32_t>(k), op_kind_name(k));
  out.Set("opKinds", kinds);
  Napi::Array lanes = Napi::Array::New(env);
  for (int l = 0; l < kLanes; ++l) lanes.Set(static_cast<uint32_t>(l), lane_name(static_cast<Lane>(l)));
  out.Set("lanes", lanes);
  out.Set("deviceStepRows", static_cast<double>(kDeviceStepRows));
  out.Set("kvPageTokens", static_cast<double>(KvCache::kPageTokens));
  return out;
}

// deviceWorkspaceBytes({nLayers, nEmbd, nHeads, nKvHeads, headDim, nFf, nVocab}, batchSize,
// headOnDevice, maxSequences, pageTokens?) -> bytes (model/op_table.h).
Napi::Value DeviceWorkspaceBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsObject()) throw Napi::TypeError::New(env, "deviceWorkspaceBytes(shape, batchSize, headOnDevice, maxSequences[, pageTokens])");
  const Napi::Object o = info[0].As<Napi::Object>();
  const WorkspaceShape s{get_int(o, "nLayers", true), get_int(o, "nEmbd", true), get_int(o, "nHeads", true), get_int(o, "nKvHeads", true),
                         get_int(o, "headDim", true), get_int(o, "nFf", true), get_int(o, "nVocab", true)};
  const int64_t batch = info[1].As<Napi::Number>().Int64Value();
  const bool head = info[2].ToBoolean().Value();
  const int64_t seqs = info[3].As<Napi::Number>().Int64Value();
  const int64_t pt = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Int64Value() : KvCache::kPageTokens;
  return Napi::Number::New(env, static_cast<double>(device_workspace_bytes(s, batch, head, seqs, pt)));
}

void InitModel(Napi::Env env, Napi::Object exports) {
  exports.Set("Model", ModelWrap::Define(env));
  exports.Set("opTable", Napi::Function::New(env, OpTable));
  exports.Set("deviceWorkspaceBytes", Napi::Function::New(env, DeviceWorkspaceBytes));
  exports.Set("listDevices", Napi::Function::New(env, ListDevices));
}

}  // namespace
}  // namespace fulcrum

FULCRUM_ADDON_PART(model, fulcrum::InitModel);
