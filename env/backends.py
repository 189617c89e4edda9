"""Chromium's GL backends for the renderer, by name, and the default.

Apart from ``env.renderer`` so that code recording which backend built something (the trainer's
warm-start recipe) does not import the renderer, its gate and tree-sitter: the GPU image's
rehearsal runs the trainer without them.
"""

from __future__ import annotations

from typing import Any

# Chromium GL backends. "reference" is the plain SwiftShader-GL path everything is checked
# against; the others trade set-up for raster speed (docs/experiments/renderer-backends.md).
BACKENDS: dict[str, dict[str, Any]] = {
    "reference": {
        "args": ["--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
        "env": {},
    },
    "llvmpipe": {
        "args": ["--use-gl=angle", "--use-angle=gl-egl", "--ignore-gpu-blocklist"],
        "env": {"EGL_PLATFORM": "surfaceless", "LIBGL_ALWAYS_SOFTWARE": "1"},
    },
    # llvmpipe WebGL with p5.brush's 2D fill masks rasterised in software: deterministic and faster
    # than "llvmpipe", but 8-bit software blending paints lighter (docs/experiments/renderer-backends.md).
    "llvmpipe-sw2d": {
        "args": ["--use-gl=angle", "--use-angle=gl-egl", "--ignore-gpu-blocklist", "--disable-accelerated-2d-canvas"],
        "env": {"EGL_PLATFORM": "surfaceless", "LIBGL_ALWAYS_SOFTWARE": "1"},
    },
    "vulkan": {
        "args": ["--use-gl=angle", "--use-angle=vulkan", "--enable-features=Vulkan",
                 "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"],
        "env": {},
    },
}
# The default. Same software 2D masks as "llvmpipe-sw2d", but the mask canvases are float16:
# p5.brush builds each fill's mask from dozens of translucent layers, which 8-bit blending loses
# paint on; float16 keeps the reference's look at the software path's speed, byte-deterministic
# (docs/experiments/renderer-backends.md).
BACKENDS["llvmpipe-f16"] = {**BACKENDS["llvmpipe-sw2d"], "float16_masks": True}
DEFAULT_BACKEND = "llvmpipe-f16"
