// Watercolour sandbox runtime. Loaded after p5, p5.brush and SES (Hardened JavaScript),
// before any sketch code exists in the page.
//
// Confinement is by capability, not by watching who is calling:
// 1. Everything the verdict needs (the report binding, the nonce, the seeded generator,
//    p5's prototype, the brush object, toDataURL) is captured here first.
// 2. lockdown() freezes every JavaScript intrinsic, so no sketch can patch JSON,
//    Array.prototype, Function.prototype or Promise.prototype under the runtime's feet.
// 3. The sketch is evaluated in a Compartment whose global object holds only the
//    endowments below: the allowlisted p5 names bound to the instance, a frozen brush
//    with the allowed methods, a seeded Math, a fixed clock, the plain typed arrays, a
//    silent console. No window, document, timers, network, storage or p5. What the page
//    holds in memory is measured from outside (the renderer reads the engine's own count
//    of array-buffer bytes and the process's memory), never counted here, where a sketch
//    could route around the counting.
//    Known names that are not endowed are traps that record their reason code.
// 4. The painting is read from the canvas of the p5 instance the runtime holds (never
//    looked up in the DOM), and the report is built from runtime-owned state only.
// The allowlists arrive in window.__WC_CONFIG, written by the renderer.
(() => {
  'use strict';
  const config = window.__WC_CONFIG;
  const report = window.__wcReport;
  const nonce = config.nonce;
  delete window.__wcReport;
  delete window.__WC_CONFIG;

  // --- runtime-owned references, taken before lockdown and before the sketch exists ---
  const P5 = window.p5;
  const realBrush = window.brush;
  const seededRandom = Math.random;  // the page's sfc32 (renderer.seed_script)
  const toDataURL = HTMLCanvasElement.prototype.toDataURL;
  // The contexts a WEBGL canvas has: the run-time not_webgl check asks the renderer p5
  // really made, whatever the sketch's source seemed to pass to createCanvas.
  const glPrototypes = [window.WebGLRenderingContext, window.WebGL2RenderingContext]
    .filter((C) => typeof C === 'function').map((C) => C.prototype);
  const getPrototypeOf = Object.getPrototypeOf;
  const OriginalDate = Date;
  const schedule = window.setTimeout.bind(window);
  const { stringify } = JSON;
  const { apply, construct, ownKeys } = Reflect;
  const { defineProperty, freeze, getOwnPropertyNames, getOwnPropertyDescriptor } = Object;
  const isArray = Array.isArray;
  const windowNames = getOwnPropertyNames(window);
  // The page's own Function constructor, for a parse-only check of the sketch's text (the
  // function it builds is never called), and the promise machinery runHook resolves with.
  const ParseFunction = Function;
  const PromiseCtor = Promise;
  const promiseThen = Promise.prototype.then;
  const regexpReplace = RegExp.prototype[Symbol.replace];
  // Error.isError (a brand check no prototype trick can fake) where the engine has it.
  const isErrorBrand = typeof Error.isError === 'function' ? Error.isError : null;
  const ErrorPrototype = Error.prototype;

  const state = {
    violations: [],   // [{code, name}]
    errors: [],       // strings
    phase: 'loading',
    framesDrawn: 0,
    png: null,
    instance: null,   // the p5 instance, as p5 hands it to our lifecycle hooks
    reported: false,
  };
  // Sketch-controlled text (error messages, property names) is cut to a bound and made
  // well-formed here: a lone UTF-16 surrogate would otherwise reach Python, the tokenizer
  // and the chat template. The renderer cleans it again on arrival (env/text.py).
  // Only runtime-made strings and primitives reach it (never an object, whose toString is
  // the sketch's): a sketch value is first turned into a primitive by describeThrown.
  const wellFormed = (text, limit) => {
    let s = typeof text === 'string' ? text : (typeof text === 'symbol' ? 'a symbol' : String(text));
    if (s.length > limit) s = s.slice(0, limit);
    return s.toWellFormed();
  };
  // What the sketch threw (or rejected with), as one primitive string the sketch cannot reach,
  // and, for a genuine error, its message. Every value here is the sketch's: a getter may
  // answer differently each time it runs, a toString may throw, a Proxy may trap, a string
  // may be 100 million characters. So the message is found by property descriptors (no
  // getter of the sketch's runs; a Proxy's trap may, once, inside the try), read once, and
  // cut to a bound; nothing here can throw.
  const describeThrown = (value) => {
    try {
      if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
        return { text: wellFormed(value, 500), message: null };
      }
      let o = value;
      for (let depth = 0; depth < 16 && o !== null && o !== undefined; depth++) {
        const desc = getOwnPropertyDescriptor(o, 'message');
        if (desc !== undefined) {
          const message = desc.value;
          if (typeof message !== 'string') return { text: 'a thrown object whose message is not text', message: null };
          const text = wellFormed(message, 500);
          return { text, message: o === value ? text : null };
        }
        o = getPrototypeOf(o);
      }
      return { text: 'a thrown object without a message', message: null };
    } catch (e) {
      return { text: 'an unprintable thrown value', message: null };
    }
  };
  const record = (code, name) => {
    if (state.violations.length < 200) state.violations[state.violations.length] = { code, name: wellFormed(name, 120) };
  };
  const recordError = (message) => {
    if (state.errors.length < 50) state.errors[state.errors.length] = wellFormed(message, 500);
  };

  // Defence in depth only: nothing here is reachable from the Compartment, but p5 and
  // p5.brush run in this realm, and the network layer blocks requests anyway.
  for (const name of ['fetch', 'XMLHttpRequest', 'WebSocket', 'WebSocketStream', 'EventSource',
    'RTCPeerConnection', 'webkitRTCPeerConnection', 'Worker', 'SharedWorker', 'open',
    'BroadcastChannel', 'FontFace']) {
    try { defineProperty(window, name, { value: undefined, configurable: false, writable: false }); } catch (e) { /* ignore */ }
  }

  // Nothing a sketch writes may reach the DevTools protocol, where Playwright's driver has to
  // hold it as one string (a 95-million-character value once killed the driver with
  // ERR_STRING_TOO_LONG). The page's console is silent (p5 or p5.brush could log an argument
  // the sketch passed them); uncaught errors and dropped rejections are handled, and
  // cancelled, by the listeners below, so Chromium never reports them to the inspector; and
  // SES's own error and rejection trapping (which logs the reason when a dropped promise is
  // collected) is off.
  const silent = () => undefined;
  const quietConsole = {};
  for (const name of ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'dirxml', 'table', 'group',
    'groupCollapsed', 'groupEnd', 'assert', 'count', 'countReset', 'time', 'timeLog', 'timeEnd', 'timeStamp',
    'profile', 'profileEnd', 'clear']) quietConsole[name] = silent;
  try { defineProperty(window, 'console', { value: quietConsole, configurable: true, writable: true }); } catch (e) { /* ignore */ }

  // --- lockdown -------------------------------------------------------------------------
  // 'min' override taming: p5 and p5.brush assign no intrinsic method names on their own
  // objects at run time (every test sketch and example renders), and 'moderate' turns
  // dozens of prototype data properties into accessors the libraries would pay for.
  // errorTaming 'safe': every error's `stack` is the empty string, in this realm and in the
  // Compartment (they share one Error). A stack names the page's URL, which changes with
  // every render, and the frames below the sketch, so a sketch reading it would paint
  // differently from run to run; the runtime reports messages only and never needed it.
  try {
    lockdown({ errorTaming: 'safe', overrideTaming: 'min', consoleTaming: 'unsafe', localeTaming: 'unsafe',
      errorTrapping: 'none', unhandledRejectionTrapping: 'none', reporting: 'none' });
  } catch (e) {
    // Our failure, not the sketch's: the renderer reads this as an infrastructure error.
    report(stringify({ nonce, endedAs: 'lockdown_failed', violations: [], errors: [String(e && e.message)], framesDrawn: 0, png: null }));
    return;
  }

  // Where each error was made, as the engine saw it: the top frame's file, function and
  // position, recorded by a stack preparer of the runtime's (SES passes it the call sites and
  // still gives every `stack` the empty string, so what the sketch sees does not change). An
  // error made inside SES's inert Function constructor has that function's own frame on top;
  // one the sketch made with the same text has a frame of the sketch's code instead.
  const madeAt = new WeakMap();
  const weakGet = WeakMap.prototype.get;
  const weakSet = WeakMap.prototype.set;
  try {
    Error.prepareStackTrace = (error, frames) => {
      try {
        const top = frames[0];
        if (top) {
          const file = top.getFileName();
          apply(weakSet, madeAt, [error, freeze([typeof file === 'string' ? file : null, top.getLineNumber(), top.getColumnNumber()])]);
        }
      } catch (e) { /* ignore */ }
      return '';
    };
  } catch (e) { /* no stack preparer: the inert constructor is then not classified */ }
  // The frame SES's inert constructors throw from, learnt by calling one here.
  let nativeStackGetter = null;
  let inertSite = null;
  try {
    const probe = new Error('probe');
    const desc = getOwnPropertyDescriptor(probe, 'stack');
    if (desc && typeof desc.get === 'function') nativeStackGetter = desc.get;
  } catch (e) { /* ignore */ }
  // [file, line, column] of the error's top frame, or null when the engine did not say.
  const frameOf = (value) => {
    try {
      let site = apply(weakGet, madeAt, [value]);
      if (site === undefined && nativeStackGetter) {
        // Not formatted yet: the engine's own accessor formats it (no sketch code runs).
        const desc = getOwnPropertyDescriptor(value, 'stack');
        if (desc && desc.get === nativeStackGetter) apply(nativeStackGetter, value, []);
        site = apply(weakGet, madeAt, [value]);
      }
      return isArray(site) ? site : null;
    } catch (e) { return null; }
  };
  const siteOf = (value) => {
    const frame = frameOf(value);
    return frame && frame[0] !== null ? `${frame[0]}:${frame[1]}:${frame[2]}` : null;
  };
  try { (function () {}).constructor('return 1'); } catch (e) { inertSite = siteOf(e); }

  // A violation error the sketch may catch; the violation is recorded before it exists.
  const violation = (code, name) => {
    record(code, name);
    return TypeError(`watercolour: ${name} is not allowed (${code})`);
  };

  // --- classification of names the sketch may reach for ------------------------------------
  const codes = config.codes;  // {name: reason code}, from env.contract
  const textNames = new Set(config.textFunctions);
  const p5Allowed = new Set(config.p5Names);
  const brushAllowed = new Set(config.brushMethods);
  const jsAllowed = new Set(config.jsGlobals);
  const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  // What p5 has under a name, from descriptors (a prototype getter must not run here).
  const p5Kind = (name) => {
    for (let o = P5.prototype; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
      const desc = getOwnPropertyDescriptor(o, name);
      if (desc) return typeof desc.value === 'function' ? 'function' : 'value';
    }
    return null;
  };
  const codeFor = (name) => {
    if (textNames.has(name)) return 'text_label';
    const kind = name === 'constructor' ? null : p5Kind(name);
    if (kind === 'value') return 'p5_function_not_allowed';
    if (hasOwn(codes, name)) return codes[name];
    if (kind === 'function') return 'bare_primitive';
    return 'external_access';  // any other browser global: a door out of the sketch
  };

  // --- values crossing into the sketch ------------------------------------------------------
  // Library objects must never reach the sketch: p5 methods return the instance or the
  // renderer (whose canvas leads to document and window), brush.circle returns its Plot.
  // Only primitives go back. Arguments are made primitive (or arrays of primitives) on the
  // way in, so no sketch callback (valueOf, toString, getters) runs inside a library call.
  const isPrimitive = (v) => v === null || (typeof v !== 'object' && typeof v !== 'function');
  const toPrimitive = (v) => {
    if (isPrimitive(v)) return v;
    if (typeof v === 'function') return undefined;
    const n = +v;  // runs the sketch's valueOf, here, in sketch-only capability
    return n === n ? n : String(v);
  };
  const argsIn = (args) => {
    const out = [];
    for (let i = 0; i < args.length && i < 64; i++) {
      const v = args[i];
      if (isArray(v)) {
        const copy = [];
        const length = Math.min(v.length >>> 0, 100000);
        for (let j = 0; j < length; j++) copy[j] = toPrimitive(v[j]);
        out[i] = copy;
      } else {
        out[i] = toPrimitive(v);
      }
    }
    return out;
  };
  const rethrow = (e) => {
    // A library error keeps its message only: its object belongs to this realm.
    return TypeError(describeThrown(e).text);
  };
  const callInto = (fn, self, args) => {
    let result;
    try { result = apply(fn, self, args); } catch (e) { throw rethrow(e); }
    return isPrimitive(result) ? result : undefined;
  };

  // --- endowments -----------------------------------------------------------------------
  const maxSide = config.maxCanvasSide;
  const MAX_CANVASES = 4;
  const CANVAS_PIXEL_BUDGET = 2 * maxSide * maxSide;
  let canvases = 0;
  let canvasPixels = 0;
  const needInstance = (name) => {
    if (!state.instance) throw TypeError(`${name}() can only be called inside setup() or draw()`);
    return state.instance;
  };
  const p5Function = (name) => {
    if (name === 'createCanvas') {
      return (...raw) => {
        const args = argsIn(raw);
        const instance = needInstance(name);
        const [w, h] = args;
        if (!(w <= maxSide && h <= maxSide && w * h <= maxSide * maxSide)) {
          throw violation('canvas_too_large', `createCanvas(${String(w)}, ${String(h)})`);
        }
        // Each createCanvas makes a new canvas and WEBGL context whose memory lives in the
        // GPU process, outside anything the page's own memory counts, and p5 does not free the
        // one it replaces. A painting needs one canvas (two, when a sketch resizes once): the
        // canvases of one render may hold CANVAS_PIXEL_BUDGET pixels in all, in at most
        // MAX_CANVASES calls. The renderer also watches the GPU process itself.
        const pixels = (w > 0 ? +w : 0) * (h > 0 ? +h : 0);
        canvases++;
        if (canvases > MAX_CANVASES || canvasPixels + pixels > CANVAS_PIXEL_BUDGET) {
          throw violation('memory_limit', `createCanvas called ${canvases} times for ${canvasPixels + pixels} pixels in all `
            + `(at most ${MAX_CANVASES} canvases, ${CANVAS_PIXEL_BUDGET} pixels)`);
        }
        canvasPixels += pixels;
        let result;
        try { result = apply(P5.prototype.createCanvas, instance, args); } catch (e) { throw rethrow(e); }
        if (config.pixelDensity !== 1) {
          // Preview renders: p5 rounds devicePixelRatio up to 1, so density is set here,
          // right after the canvas exists and before anything is painted.
          apply(P5.prototype.pixelDensity, instance, [config.pixelDensity]);
        }
        return result && typeof result.then === 'function' ? Promise.resolve(result).then(() => undefined) : undefined;
      };
    }
    if (name === 'random') {
      return (...raw) => {
        const instance = needInstance(name);
        if (isArray(raw[0])) {
          // random(list) returns one of the sketch's own elements: pick the index with
          // p5's generator (same draw as p5's own random(list)) and index the sketch's copy.
          const list = [];
          const length = Math.min(raw[0].length >>> 0, 100000);
          for (let j = 0; j < length; j++) list[j] = raw[0][j];
          const index = apply(P5.prototype.random, instance, [list.map((_, j) => j)]);
          return list[index];
        }
        return callInto(P5.prototype.random, instance, argsIn(raw));
      };
    }
    return (...raw) => callInto(P5.prototype[name], needInstance(name), argsIn(raw));
  };

  const endowments = {};
  for (const name of p5Allowed) {
    if (p5Kind(name) === 'function') {
      endowments[name] = { value: freeze(p5Function(name)) };
    } else {
      // width, height and the constants: read from the instance each time.
      endowments[name] = {
        get: () => {
          const value = state.instance ? state.instance[name] : P5.prototype[name];
          return isPrimitive(value) ? value : undefined;
        },
      };
    }
  }

  // brush: a frozen object; its own keys are the allowed methods and the real-but-
  // forbidden ones (stubs); any other key is answered by the proxy with its reason code.
  const brushTarget = {};
  for (const name of ownKeys(realBrush)) {
    if (typeof name !== 'string') continue;
    if (brushAllowed.has(name) && typeof realBrush[name] === 'function') {
      const method = realBrush[name];
      brushTarget[name] = freeze((...raw) => callInto(method, realBrush, argsIn(raw)));
    } else {
      brushTarget[name] = freeze(() => { throw violation('brush_method_not_allowed', `brush.${name}`); });
    }
  }
  freeze(brushTarget);
  const brush = new Proxy(brushTarget, freeze({
    get(target, key) {
      if (typeof key === 'symbol') return undefined;
      if (Object.prototype.hasOwnProperty.call(target, key)) return target[key];
      throw violation('unknown_brush_method', `brush.${String(key)}`);
    },
  }));
  endowments.brush = { value: brush };

  // A deterministic clock: the Date epoch is fixed and performance.now() advances by
  // exactly 1 ms per call, so a time-budget loop ends and the same sketch and seed give
  // the same picture (`randomSeed(Date.now())` is a real model habit).
  const EPOCH = config.clockEpochMs;
  let clockMs = 0;
  function FixedDate(...args) {
    if (new.target === undefined) return new OriginalDate(EPOCH).toString();
    return construct(OriginalDate, args.length ? args : [EPOCH], new.target);
  }
  defineProperty(FixedDate, 'prototype', { value: OriginalDate.prototype });
  FixedDate.now = () => EPOCH;
  FixedDate.parse = OriginalDate.parse;
  FixedDate.UTC = OriginalDate.UTC;
  endowments.Date = { value: harden(FixedDate) };
  endowments.performance = { value: harden({ now: () => (clockMs += 1) }) };

  // Math: the Compartment's shared Math (which has no random) plus the page's seeded
  // generator, the same function p5 and p5.brush draw from, as before the confinement.
  endowments.Math = { value: null };  // filled in once the Compartment exists

  const noop = () => undefined;
  endowments.console = { value: harden({ log: noop, info: noop, warn: noop, error: noop, debug: noop }) };

  // Typed arrays, ArrayBuffer and DataView: the real (frozen) constructors, since a
  // Compartment's global has none. Their bytes are bounded by what the page really holds,
  // measured by the renderer from the engine's accounting and the process's memory,
  // whichever way the sketch allocates them.
  for (const name of ['ArrayBuffer', 'DataView', 'Float32Array', 'Float64Array', 'Int8Array', 'Int16Array',
    'Int32Array', 'Uint8Array', 'Uint8ClampedArray', 'Uint16Array', 'Uint32Array']) {
    if (jsAllowed.has(name) && typeof window[name] === 'function') endowments[name] = { value: window[name] };
  }

  // The sketch's hooks: plain writable globals, so `setup = function () {}` works too.
  endowments.setup = { value: undefined, writable: true };
  endowments.draw = { value: undefined, writable: true };

  // --- the Compartment ----------------------------------------------------------------------
  const compartment = new Compartment({ __options__: true, globals: {}, name: 'sketch' });
  const sketchGlobal = compartment.globalThis;
  const sharedMath = sketchGlobal.Math;
  const mathCopy = {};
  for (const key of ownKeys(sharedMath)) {
    if (key !== 'random') defineProperty(mathCopy, key, getOwnPropertyDescriptor(sharedMath, key));
  }
  mathCopy.random = seededRandom;
  endowments.Math = { value: harden(mathCopy) };

  const trap = (name, code) => ({
    get() { throw violation(code, name); },
    set() { throw violation(code, name); },
  });
  // The global object itself: the sketch gets its own (empty) global, recorded.
  const selfReference = (name) => ({
    get() { record('external_access', name); return sketchGlobal; },
    set() { throw violation('external_access', name); },
  });

  // Names the Compartment's global already has (SES's shared intrinsics, eval, Function,
  // Compartment, globalThis...): the allowed plain-JavaScript ones stay, the rest are traps.
  for (const name of getOwnPropertyNames(sketchGlobal)) {
    if (jsAllowed.has(name) && !(name in endowments)) continue;
    if (name === 'undefined' || name === 'NaN' || name === 'Infinity') continue;
    if (name in endowments) continue;
    const desc = getOwnPropertyDescriptor(sketchGlobal, name);
    if (!desc.configurable) continue;
    if (name === 'globalThis') { defineProperty(sketchGlobal, name, { ...selfReference(name), configurable: false }); continue; }
    const code = Object.prototype.hasOwnProperty.call(codes, name) ? codes[name]
      : (['Compartment', 'harden', 'lockdown', 'assert', 'ModuleSource'].includes(name) ? 'dynamic_code' : 'unknown_global');
    defineProperty(sketchGlobal, name, { ...trap(name, code), configurable: false });
  }
  for (const [name, desc] of Object.entries(endowments)) {
    defineProperty(sketchGlobal, name, { ...('value' in desc ? { writable: false } : {}), ...desc, configurable: false, enumerable: false });
  }
  // Browser and p5 names the sketch may reach for: traps with their reason code.
  const trapNames = new Set([...windowNames, ...getOwnPropertyNames(P5.prototype), ...Object.keys(codes), ...textNames]);
  for (const name of trapNames) {
    if (name in endowments || hasOwn(sketchGlobal, name) || name === 'p5') continue;
    if (jsAllowed.has(name)) continue;  // plain JavaScript that SES keeps out: absent
    if (name === 'constructor') continue;
    const code = codeFor(name);
    const desc = ['window', 'self', 'top', 'parent', 'frames'].includes(name) ? selfReference(name) : trap(name, code);
    defineProperty(sketchGlobal, name, { ...desc, configurable: false, enumerable: false });
  }
  // `p5` itself: recorded, and what the sketch reaches through it records its own code
  // (`p5.prototype.text` is text_label, `p5.instance` external_access).
  const p5Prototype = new Proxy(freeze({}), freeze({
    get(_target, key) {
      if (typeof key === 'symbol') return undefined;
      throw violation(codeFor(key), `p5.prototype.${key}`);
    },
  }));
  const fakeP5 = new Proxy(freeze({}), freeze({
    get(_target, key) {
      if (key === 'prototype') return p5Prototype;
      if (typeof key === 'symbol') return undefined;
      throw violation('external_access', `p5.${String(key)}`);
    },
  }));
  defineProperty(sketchGlobal, 'p5', {
    get() { record('external_access', 'p5'); return fakeP5; },
    set() { throw violation('external_access', 'p5'); },
    configurable: false,
  });
  // Nothing can be added: an assignment to an undeclared name fails as in strict code.
  Object.preventExtensions(sketchGlobal);

  // --- errors -------------------------------------------------------------------------------
  // Where a capability is simply absent, the error still names a reason code the policy
  // can act on: SES's inert Function constructors, writes to frozen built-ins, and property
  // reads of a missing receiver that name a known forbidden member
  // (`(function () { return this; })().fetch` in strict code). The reason code must come
  // from what happened, not from text the sketch wrote: an error's message is the sketch's
  // to choose (`throw new Error("... SES_EVAL_REJECTED ... (reading 'localStorage')")`).
  // So a message is classified only when the thrown value is a genuine error whose own
  // message is, whole, exactly the text the engine (or SES) writes for that event, and whose
  // top frame (madeAt) is where the engine throws it (see atWrite & co. below); text that
  // merely mentions a pattern, or an error the sketch made with the very same text, classifies
  // nothing. SES's refusal of the source is observed where it happens, in the compile step
  // below, before any of the sketch runs.
  const isGenuineError = (value) => {
    try {
      if (isErrorBrand) return apply(isErrorBrand, undefined, [value]) === true;
      for (let o = getPrototypeOf(value), depth = 0; o && depth < 16; o = getPrototypeOf(o), depth++) {
        if (o === ErrorPrototype) return true;
      }
    } catch (e) { /* a Proxy's trap threw */ }
    return false;
  };
  // The sketch's source text at an error's top frame, when that frame is the sketch's own code
  // (no file: the Compartment's evaluation); '' when it is elsewhere, null when unknown.
  let evaluatedLines = null;
  const sketchTextAt = (value) => {
    const frame = frameOf(value);
    if (!frame) return null;
    const [file, line, column] = frame;
    if (file !== null) return '';
    if (typeof line !== 'number' || typeof column !== 'number') return '\u0000native';  // a built-in's own frame
    if (evaluatedLines === null) return null;
    const text = evaluatedLines[line - 1];
    if (typeof text !== 'string') return null;
    return text.slice(Math.max(0, column - 1), column + 80);
  };
  const textBefore = (value) => {
    const frame = frameOf(value);
    if (!frame || evaluatedLines === null || typeof frame[1] !== 'number') return '';
    const text = evaluatedLines[frame[1] - 1];
    return typeof text === 'string' ? text.slice(Math.max(0, frame[2] - 41), Math.max(0, frame[2] - 1)) : '';
  };
  // Where the engine throws each of these: at the assignment operator of a write, at the
  // `delete`, inside the built-in that defines a property, at the `.`/`[` (or the name after a
  // `.`) of a property read. An error the sketch made with the same text is thrown where it
  // was made: at a `new` or a call, which is none of these.
  const ASSIGNING = /^(?:=(?!=)|\+\+|--|\*\*=|<<=|>>>?=|&&=|\|\|=|\?\?=|[-+*/%&|^]=)/;
  const atWrite = (value) => { const at = sketchTextAt(value); return at !== null && ASSIGNING.test(at); };
  const inBuiltin = (value) => sketchTextAt(value) === '\u0000native';
  const atDelete = (value) => { const at = sketchTextAt(value); return at !== null && /^delete\b/.test(at); };
  const atRead = (value, name) => {
    const at = sketchTextAt(value);
    if (at === null || at === '' || at === '\u0000native') return false;
    if (/^(?:\?\.|\.|\[)/.test(at)) return true;
    return at.startsWith(name) && /(?:\?\.|\.)\s*$/.test(textBefore(value));
  };
  const ENGINE_MESSAGES = [
    // SES's inert Function/AsyncFunction/GeneratorFunction constructors (tame-function-constructors.js).
    [/^Function\.prototype\.constructor is not a valid constructor\.$/, (_m, value) => (
      inertSite !== null && siteOf(value) === inertSite ? ['dynamic_code', 'Function constructor'] : null)],
    // V8, strict-mode writes to what lockdown froze (JSON.stringify, Array.prototype.push...).
    [/^Cannot assign to read only property '[^']{1,80}' of (?:object|function) '[^']{0,200}'$/, (_m, value) => (
      atWrite(value) ? ['dynamic_code', 'patching a frozen built-in'] : null)],
    [/^Cannot add property [^ ,]{1,80}, object is not extensible$/, (_m, value) => (
      atWrite(value) ? ['dynamic_code', 'patching a frozen built-in'] : null)],
    [/^Cannot (?:define property [^ ,]{1,80}, object is not extensible|redefine property: [^ ]{1,80})$/, (_m, value) => (
      inBuiltin(value) ? ['dynamic_code', 'patching a frozen built-in'] : null)],
    [/^Cannot delete property '[^']{1,80}' of .{1,200}$/, (_m, value) => (
      atDelete(value) ? ['dynamic_code', 'patching a frozen built-in'] : null)],
    [/^Cannot read properties of (?:undefined|null) \(reading '([^']{1,60})'\)$/, (m, value) => (
      trapNames.has(m[1]) && !p5Allowed.has(m[1]) && atRead(value, m[1]) ? [codeFor(m[1]), m[1]] : null)],
  ];
  const classifyThrown = (value, described) => {
    try {
      const message = described.message;
      if (message === null || !isGenuineError(value)) return;
      for (const [pattern, codeOf] of ENGINE_MESSAGES) {
        const m = pattern.exec(message);
        if (m) {
          const found = codeOf(m, value);
          if (found) record(found[0], found[1]);
          return;
        }
      }
    } catch (e) { /* classification is best effort; the error itself is recorded */ }
  };
  // What the sketch threw: recorded (bounded, well-formed) and classified. Never throws.
  const recordThrown = (value) => {
    try {
      const described = describeThrown(value);
      classifyThrown(value, described);
      recordError(described.text);
    } catch (e) { /* nothing the sketch hands back may stop the render from ending */ }
  };

  // --- capture and report ---------------------------------------------------------------------
  const isWebglRenderer = (renderer) => {
    const context = renderer && renderer.drawingContext;
    return !!context && typeof context === 'object' && glPrototypes.includes(getPrototypeOf(context));
  };
  const snapshot = () => {
    const instance = state.instance;
    const canvas = instance && instance._renderer && instance._renderer.canvas;
    if (!canvas) return null;
    // The painting must come from a WEBGL renderer: p5 makes a 2D one when createCanvas
    // never runs (an aliased or unreachable call) or runs without WEBGL.
    if (!isWebglRenderer(instance._renderer)) record('not_webgl', 'the canvas p5 created is not WEBGL');
    if (!(canvas.width <= maxSide * 2 && canvas.height <= maxSide * 2)) {
      record('canvas_too_large', `canvas ${canvas.width}x${canvas.height}`);
      return null;
    }
    try { return apply(toDataURL, canvas, ['image/png']); } catch (e) { recordThrown(e); return null; }
  };
  // Macrotask hops between the capture and the report. Everything the sketch can still run
  // after the capture is a microtask (it has no timers or I/O), drained before the first
  // hop; Chromium dispatches `unhandledrejection` for a dropped promise in a task it posts
  // at the end of that drain, so that task is queued before the second hop's timer is even
  // set. The third hop is margin. Any error or rejection the page sees starts the count
  // again (a chain of dropped rejections is still running), up to MAX_BUSY_HOPS: a sketch
  // that keeps failing after its capture is reported then, with that said, instead of
  // keeping the render open until the deadline.
  const REPORT_HOPS = 3;
  const MAX_BUSY_HOPS = 200;
  let activity = 0;
  const sendReport = (phase) => {
    if (state.reported) return;
    state.reported = true;
    try {
      report(stringify({
        nonce, endedAs: phase, violations: state.violations, errors: state.errors,
        framesDrawn: state.framesDrawn, png: state.png,
      }));
    } catch (e) {
      // Runtime-owned primitives only: cannot fail short of the page dying, which the
      // renderer sees; a report without the painting still ends the render now.
      try { report(stringify({ nonce, endedAs: 'report_failed', violations: [], errors: ['the report could not be sent'], framesDrawn: 0, png: null })); } catch (e2) { /* ignore */ }
    }
  };
  const finish = (phase) => {
    if (state.phase === 'done') return;
    state.phase = 'done';
    // The picture is taken now (a WEBGL back buffer does not survive the task); the report
    // is built REPORT_HOPS quiet macrotasks later from the state as it is then, so violations
    // from microtasks the sketch queued and rejections nobody awaited are in it. A sketch
    // that queues microtasks forever ends as render_timeout.
    try { state.png = snapshot(); } catch (e) { state.png = null; recordError('the canvas could not be read'); }
    state.endedAs = phase;
    let quiet = 0;
    let hops = 0;
    let seen = activity;
    const hop = () => {
      try {
        hops++;
        if (activity !== seen) { seen = activity; quiet = 0; } else { quiet++; }
        if (quiet >= REPORT_HOPS) { sendReport(phase); return; }
        if (hops >= MAX_BUSY_HOPS) {
          recordError('the sketch kept failing after its painting was captured');
          sendReport(phase);
          return;
        }
        schedule(hop, 0);
      } catch (e) { sendReport(phase); }
    };
    try { schedule(hop, 0); } catch (e) { sendReport(phase); }
  };
  // Both listeners cancel the event: a cancelled error or rejection is not reported to the
  // console or the DevTools protocol (whose message would carry the sketch's text, stack and
  // function names unbounded). After the report nothing of the sketch's is read any more, so
  // no sketch code runs in them once the verdict has left.
  window.addEventListener('error', (event) => {
    try { event.preventDefault(); } catch (e) { /* ignore */ }
    try {
      if (state.reported) return;
      activity++;
      const thrown = event.error;
      recordThrown(thrown !== undefined ? thrown : 'an error without a value');
    } catch (e) { /* ignore */ }
  });
  window.addEventListener('unhandledrejection', (event) => {
    // A promise the sketch dropped (an async helper nobody awaits), or p5's own when a
    // library hook failed and p5 stopped. Recorded in every phase, also after the capture
    // (the report has not left yet); before the capture it ends the render, since p5 may
    // never reach our postdraw.
    try { event.preventDefault(); } catch (e) { /* ignore */ }
    try {
      if (state.reported) return;
      activity++;
      recordThrown(event.reason);
    } catch (e) { /* ignore */ }
    finish('rejected');
  });

  // --- evaluate the sketch ---------------------------------------------------------------------
  // Two steps, so that what the runtime reports about the source is what it observed:
  // 1. compile: the sketch's text becomes the body of a function that is not called yet.
  //    A failure here ran none of the sketch's code, so its message is the parser's or SES's
  //    own: SES refuses source with a direct eval or an import expression (SES_EVAL_REJECTED,
  //    SES_IMPORT_REJECTED) before evaluating any of it, and that refusal is dynamic_code.
  //    The body is first parsed on its own by the page's Function constructor (strict, never
  //    called), so it cannot close the wrapper early and run code during the compile step.
  // 2. run: the function runs the sketch's top level and returns a closure that reads
  //    setup/draw, whether declared or assigned to the global.
  // SES refuses `<!--`/`-->` anywhere in the source (they open comments in scripts);
  // they are rewritten as operators first, which is also how the static gate parsed them.
  // The renderer has already rewritten `eval(`/`import(` where they occur in comments and
  // strings (env/gate/source.py), so SES refuses only a real call.
  const source = apply(regexpReplace, /<!--|-->/g, [config.sketch, (match) => (match === '<!--' ? '< ! --' : '-- >')]);
  const HOOKS = '\n;return () => [typeof setup === "function" ? setup : undefined, typeof draw === "function" ? draw : undefined];\n';
  const compileFailure = (e, sesStep) => {
    const described = describeThrown(e);
    if (sesStep && described.message !== null) {
      if (/\(SES_EVAL_REJECTED\)$/.test(described.message)) record('dynamic_code', 'eval( in the code');
      if (/\(SES_IMPORT_REJECTED\)$/.test(described.message)) record('dynamic_code', 'import( in the code');
    }
    recordError(described.text);
    finish('sketch_error');
  };
  try {
    new ParseFunction(`'use strict';${source}${HOOKS}`);
  } catch (e) {
    compileFailure(e, false);
    return;
  }
  let body;
  const evaluated = `(function () {${source}${HOOKS}})`;
  // Lines of what SES evaluates, for sketchTextAt (positions of frames refer to this text).
  evaluatedLines = evaluated.split('\n');
  try {
    body = compartment.evaluate(evaluated, { __evadeHtmlCommentTest__: true });
  } catch (e) {
    compileFailure(e, true);
    return;
  }
  let hooks;
  try {
    hooks = apply(body, sketchGlobal, []);
  } catch (e) {
    recordThrown(e);
    finish('sketch_error');
    return;
  }
  const readHooks = () => {
    try {
      const pair = apply(hooks, undefined, []);
      return isArray(pair) ? [pair[0], pair[1]] : [undefined, undefined];
    } catch (e) { recordThrown(e); return [undefined, undefined]; }
  };
  const [sketchSetup, sketchDraw] = readHooks();
  if (typeof sketchSetup !== 'function' && typeof sketchDraw !== 'function') {
    finish('no_sketch');  // p5 starts only when it finds setup or draw
    return;
  }
  // p5 calls these (`context.setup()` in global mode). `this` inside the sketch's hooks is
  // its own global, never window.
  // A hook that throws or rejects ends the render at that point (p5 would stop there and
  // never reach our postdraw); its promise is handled here, so p5 sees none of it. Neither
  // path can throw: a render always ends when its sketch fails.
  const failed = (e) => { recordThrown(e); finish('rejected'); };
  const runHook = (fn) => {
    let result;
    try { result = apply(fn, sketchGlobal, []); } catch (e) { failed(e); return undefined; }
    if (isPrimitive(result)) return undefined;
    // The hook's result (an async hook's promise, or any object) is settled through a
    // promise of the runtime's: its resolve function reads `then` exactly once and turns a
    // throwing or two-faced getter, or a throwing `then`, into a rejection handled here.
    try {
      return apply(promiseThen, new PromiseCtor((resolve) => resolve(result)), [() => undefined, failed]);
    } catch (e) { failed(e); return undefined; }
  };
  window.setup = () => (typeof sketchSetup === 'function' ? runHook(sketchSetup) : undefined);
  // Read again at each frame, so a draw assigned during setup (`draw = function () {...}`,
  // a common p5 pattern) is the one that runs, also when there was none before setup.
  window.draw = () => {
    if (state.phase === 'done') return undefined;  // after a failed setup: nothing more runs
    const current = readHooks()[1];
    return runHook(typeof current === 'function' ? current : sketchDraw);
  };

  // Registered after p5.brush, so our postdraw runs after its flush to the canvas.
  P5.registerAddon((_P5, _fn, lifecycles) => {
    lifecycles.presetup = function () {
      state.phase = 'setup';
      state.instance = this;
    };
    lifecycles.postsetup = function () {
      if (state.phase === 'done') return;
      // The renderer p5 really made: an aliased createCanvas that never ran leaves p5's
      // default 2D canvas, on which p5.brush cannot paint.
      if (!isWebglRenderer(this._renderer)) {
        record('not_webgl', 'the canvas p5 created is not WEBGL');
        finish('not_webgl');
        return;
      }
      state.phase = 'draw';
      // Without a draw() (declared, or assigned during setup) the painting is what setup
      // left: p5.brush has flushed in its postsetup hook, which ran before this one.
      if (typeof readHooks()[1] !== 'function') finish('setup_only');
    };
    lifecycles.postdraw = function () {
      if (state.phase === 'done') return;
      state.framesDrawn++;
      try { apply(P5.prototype.noLoop, this, []); } catch (e) { /* ignore */ }
      finish('drawn');
    };
  });
})();
