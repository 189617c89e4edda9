// Watercolour sandbox runtime. Loaded after p5 and p5.brush, before the sketch.
// It (1) removes network, storage and timer escape hatches the sketch could reach,
// (2) replaces every non-allowed p5 global and brush method with a stub that records
// a violation and throws, and (3) snapshots the WEBGL canvas with toDataURL once the
// first frame (and p5.brush's flush in its postdraw hook) has finished.
// The allowlists arrive in window.__WC_CONFIG, written by the renderer.
(() => {
  'use strict';
  const config = window.__WC_CONFIG;
  const state = {
    violations: [],   // [{code, name}]
    errors: [],       // strings
    phase: 'loading',
    framesDrawn: 0,
    png: null,
    userDepth: 0,     // > 0 while sketch code is on the stack
    libDepth: 0,      // > 0 while an allowed library call runs on behalf of the sketch
  };
  // The result goes back through a Playwright binding captured here and removed from the
  // window, with a per-render nonce: the sketch can neither fake a report nor reach the
  // depth counters below, which decide what counts as its own call.
  const report = window.__wcReport;
  const nonce = config.nonce;
  delete window.__wcReport;
  delete window.__WC_CONFIG;
  const originalAppendChild = Node.prototype.appendChild;
  const originalToDataURL = HTMLCanvasElement.prototype.toDataURL;
  const originalQuerySelector = Document.prototype.querySelector;
  const originalCreateElement = Document.prototype.createElement;

  const record = (code, name) => {
    if (state.violations.length < 200) state.violations.push({ code, name: String(name) });
  };
  const recordError = (message) => {
    if (state.errors.length < 50) state.errors.push(String(message).slice(0, 500));
  };
  window.addEventListener('error', (e) => recordError(e.message || e.error));
  window.addEventListener('unhandledrejection', (e) => {
    const reason = e.reason;
    recordError(reason && reason.message ? reason.message : reason);
    finish('rejected');
  });

  // The guard decides whether a call is the sketch's own (forbidden) or the libraries'
  // (allowed): library internals run either outside sketch code (userDepth == 0) or
  // inside an allowed call that raised libDepth.
  const sketchIsCalling = () => state.userDepth > 0 && state.libDepth === 0;
  const violation = (code, name) => {
    record(code, name);
    return new Error(`watercolour: ${name} is not allowed (${code})`);
  };
  const forbidden = (code, name) => function () { throw violation(code, name); };
  const guardMethod = (owner, name, code) => {
    const original = owner[name];
    if (typeof original !== 'function') return;
    const guarded = function (...args) {
      if (sketchIsCalling()) throw violation(code, name);
      return original.apply(this, args);
    };
    try {
      Object.defineProperty(owner, name, { value: guarded, configurable: true, writable: true });
    } catch (e) { /* non-configurable host property: left to the network sandbox */ }
  };
  const enterLibrary = (fn, self) => function (...args) {
    state.libDepth++;
    try { return fn.apply(self === undefined ? this : self, args); } finally { state.libDepth--; }
  };
  const runAsSketch = (fn) => function (...args) {
    state.userDepth++;
    let result;
    try {
      result = fn.apply(this, args);
    } catch (e) {
      state.userDepth--;
      throw e;
    }
    if (result && typeof result.then === 'function') {
      return result.finally(() => { state.userDepth--; });
    }
    state.userDepth--;
    return result;
  };

  // 1. Escape hatches. The browser also blocks every request at the network layer; these
  // stubs exist so an attempt becomes a recorded reason code rather than a silent failure.
  const external = ['fetch', 'XMLHttpRequest', 'WebSocket', 'WebSocketStream', 'EventSource',
    'RTCPeerConnection', 'webkitRTCPeerConnection', 'Worker', 'SharedWorker', 'open',
    'importScripts', 'Image', 'Audio', 'BroadcastChannel', 'FontFace'];
  for (const name of external) {
    if (name === 'Image') continue;  // p5.brush builds image tips with window.Image: guard, don't remove
    try { Object.defineProperty(window, name, { value: forbidden('external_access', name), configurable: false, writable: false }); } catch (e) { /* ignore */ }
  }
  guardMethod(window, 'Image', 'external_access');
  if (navigator.sendBeacon) guardMethod(Navigator.prototype, 'sendBeacon', 'external_access');
  for (const name of ['setTimeout', 'setInterval', 'requestAnimationFrame', 'queueMicrotask', 'requestIdleCallback']) {
    guardMethod(window, name, 'timer');
  }
  for (const name of ['localStorage', 'sessionStorage', 'indexedDB', 'caches']) {
    try { Object.defineProperty(window, name, { get: () => { throw violation('storage', name); }, configurable: false }); } catch (e) { /* ignore */ }
  }
  for (const name of ['createElement', 'createElementNS', 'getElementById', 'querySelector',
    'querySelectorAll', 'getElementsByTagName', 'write', 'writeln', 'open']) {
    guardMethod(Document.prototype, name, 'dom_access');
  }
  for (const name of ['appendChild', 'insertBefore', 'replaceChild', 'removeChild']) {
    guardMethod(Node.prototype, name, 'dom_access');
  }
  for (const name of ['insertAdjacentHTML', 'setAttribute', 'append', 'prepend', 'remove']) {
    guardMethod(Element.prototype, name, 'dom_access');
  }
  guardMethod(HTMLCanvasElement.prototype, 'getContext', 'dom_access');
  guardMethod(HTMLCanvasElement.prototype, 'toDataURL', 'dom_access');
  for (const name of ['fillText', 'strokeText']) {
    guardMethod(CanvasRenderingContext2D.prototype, name, 'text_label');
  }
  const innerHTML = Object.getOwnPropertyDescriptor(Element.prototype, 'innerHTML');
  Object.defineProperty(Element.prototype, 'innerHTML', {
    get() { return innerHTML.get.call(this); },
    set(v) { if (sketchIsCalling()) throw violation('dom_access', 'innerHTML'); innerHTML.set.call(this, v); },
    configurable: true,
  });
  // eval/Function: p5 does not need them at run time; the sketch never may.
  window.eval = forbidden('dynamic_code', 'eval');
  const OriginalFunction = Function;
  const FunctionGuard = function () {
    if (sketchIsCalling()) throw violation('dynamic_code', 'Function');
    return OriginalFunction.apply(this, arguments);
  };
  FunctionGuard.prototype = OriginalFunction.prototype;
  Object.defineProperty(OriginalFunction.prototype, 'constructor', { value: FunctionGuard, configurable: true, writable: true });
  window.Function = FunctionGuard;
  for (const ctorName of ['AsyncFunction', 'GeneratorFunction', 'AsyncGeneratorFunction']) {
    const sample = { AsyncFunction: async function () {}, GeneratorFunction: function* () {}, AsyncGeneratorFunction: async function* () {} }[ctorName];
    const proto = Object.getPrototypeOf(sample);
    Object.defineProperty(proto, 'constructor', { value: forbidden('dynamic_code', ctorName), configurable: true, writable: true });
  }

  // 2. p5 and brush allowlists, installed once p5 has bound its globals (presetup).
  const p5Allowed = new Set(config.p5Names);
  const brushAllowed = new Set(config.brushMethods);
  const textNames = new Set(config.textFunctions);
  const codeForP5 = (name) => (textNames.has(name) ? 'text_label' : 'bare_primitive');

  const installBrushAllowlist = () => {
    const real = window.brush;
    const safe = {};
    for (const name of Object.keys(real)) {
      if (brushAllowed.has(name) && typeof real[name] === 'function') {
        safe[name] = enterLibrary(real[name], real);
      } else {
        safe[name] = forbidden('brush_method_not_allowed', `brush.${name}`);
      }
    }
    const proxy = new Proxy(Object.freeze(safe), {
      get(target, key) {
        if (typeof key === 'symbol') return target[key];
        if (Object.prototype.hasOwnProperty.call(target, key)) return target[key];
        throw violation('unknown_brush_method', `brush.${String(key)}`);
      },
    });
    Object.defineProperty(window, 'brush', { value: proxy, configurable: false, writable: false });
  };
  installBrushAllowlist();

  // Prototype methods are guarded before the sketch's top level runs, so it cannot keep an
  // unguarded reference (`const t = p5.prototype.text`) for later.
  const P5 = window.p5;
  for (const name of Object.getOwnPropertyNames(P5.prototype)) {
    if (name === 'constructor' || p5Allowed.has(name)) continue;
    const desc = Object.getOwnPropertyDescriptor(P5.prototype, name);
    if (desc && typeof desc.value === 'function') guardMethod(P5.prototype, name, codeForP5(name));
  }
  const installP5Allowlist = (instance) => {
    for (const name of Object.getOwnPropertyNames(instance)) {
      const desc = Object.getOwnPropertyDescriptor(instance, name);
      if (!p5Allowed.has(name) && desc && typeof desc.value === 'function') guardMethod(instance, name, codeForP5(name));
    }
    // Globals: allowed ones run as library calls, the rest become stubs or guarded getters.
    for (const name of Object.getOwnPropertyNames(window)) {
      if (!(name in P5.prototype) && !Object.prototype.hasOwnProperty.call(instance, name)) continue;
      if (name === 'brush' || name === 'setup' || name === 'draw') continue;
      const desc = Object.getOwnPropertyDescriptor(window, name);
      if (!desc) continue;
      if (!desc.configurable) {
        // The sketch declared a global of this name itself; p5 could not bind over it, and
        // whatever the sketch calls it runs as sketch code, so nothing is let through.
        continue;
      }
      if (p5Allowed.has(name)) {
        const protoFn = P5.prototype[name];
        if (typeof protoFn === 'function') {
          // Wrap p5's own function, never whatever the window holds.
          let wrapped = enterLibrary(protoFn, instance);
          if (name === 'createCanvas' && config.pixelDensity !== 1) {
            // Preview renders: p5 rounds devicePixelRatio up to 1, so density is set here,
            // right after the canvas exists and before anything is painted.
            const create = wrapped;
            const setDensity = enterLibrary(P5.prototype.pixelDensity, instance);
            wrapped = function (...args) { const c = create(...args); setDensity(config.pixelDensity); return c; };
          }
          Object.defineProperty(window, name, { value: wrapped, configurable: true, writable: true });
        }
        continue;
      }
      if (typeof desc.value === 'function') {
        // Guarded, not removed: p5 itself calls window.resetMatrix() etc. in global mode.
        guardMethod(window, name, codeForP5(name));
      } else {
        const read = desc.get ? desc.get : () => desc.value;
        Object.defineProperty(window, name, {
          get() { if (sketchIsCalling()) throw violation('p5_function_not_allowed', name); return read(); },
          set(v) { if (desc.set) desc.set(v); },
          configurable: true,
        });
      }
    }
    // p5.instance is how p5.brush finds its renderer; the sketch may not reach through it.
    const instanceDesc = { get() { if (sketchIsCalling()) throw violation('external_access', 'p5'); return instance; }, configurable: true };
    try { Object.defineProperty(P5, 'instance', instanceDesc); } catch (e) { /* ignore */ }
  };

  const snapshot = () => {
    const canvas = originalQuerySelector.call(document, 'canvas.p5Canvas') || originalQuerySelector.call(document, 'canvas');
    if (!canvas) return null;
    try { return originalToDataURL.call(canvas, 'image/png'); } catch (e) { recordError(e.message); return null; }
  };
  const finish = (phase) => {
    if (state.phase === 'done') return;
    if (state.png === null) {
      state.libDepth++;
      try { state.png = snapshot(); } finally { state.libDepth--; }
    }
    state.endedAs = phase;
    state.phase = 'done';
    report(JSON.stringify({
      nonce, endedAs: phase, violations: state.violations, errors: state.errors,
      framesDrawn: state.framesDrawn, png: state.png,
    }));
  };

  // 3. The sketch runs as an inline script inserted from here, so its top-level statements
  // count as sketch code too. A syntax error surfaces through the window error event.
  const sketchElement = originalCreateElement.call(document, 'script');
  sketchElement.textContent = config.sketch;
  state.userDepth++;
  try { originalAppendChild.call(document.head, sketchElement); } finally { state.userDepth--; }
  // A sketch may declare its own helper named like a p5 function (`function line()`).
  // Such a global is non-configurable, and p5's global binding would throw on it and
  // abort the sketch; p5 leaves those names to the sketch instead, until p5 has bound.
  const sketchDeclared = new Set(Object.getOwnPropertyNames(window).filter((name) => {
    const desc = Object.getOwnPropertyDescriptor(window, name);
    return name in P5.prototype && desc && !desc.configurable;
  }));
  const originalDefineProperty = Object.defineProperty;
  if (sketchDeclared.size) {
    Object.defineProperty = function (target, name, descriptor) {
      if (target === window && sketchDeclared.has(name)) return target;
      return originalDefineProperty.call(Object, target, name, descriptor);
    };
  }
  if (typeof window.setup !== 'function' && typeof window.draw !== 'function') {
    // p5 starts only when it finds setup or draw; without them nothing would ever finish.
    finish('no_sketch');
    return;
  }

  // Registered after p5.brush, so our postdraw runs after its flush to the canvas.
  window.p5.registerAddon((P5, fn, lifecycles) => {
    lifecycles.presetup = function () {
      state.phase = 'setup';
      Object.defineProperty = originalDefineProperty;
      installP5Allowlist(this);
      if (typeof window.setup === 'function') window.setup = runAsSketch(window.setup);
      if (typeof window.draw === 'function') window.draw = runAsSketch(window.draw);
    };
    lifecycles.postsetup = function () {
      state.phase = 'draw';
      // Without draw() p5 never runs the postdraw hooks; p5.brush has flushed in its
      // postsetup hook, which ran before this one.
      if (typeof window.draw !== 'function') finish('setup_only');
    };
    lifecycles.postdraw = function () {
      state.framesDrawn++;
      state.libDepth++;
      try { this.noLoop(); } finally { state.libDepth--; }
      finish('drawn');
    };
  });
})();
