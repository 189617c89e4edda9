// Still life: three lemons and a sprig of leaves on a blue-grey cloth, warm shadows.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

function blob(cx, cy, rx, ry, tilt, wobble) {
  brush.beginShape(0.7);
  for (let i = 0; i < 10; i++) {
    const a = i * 36;
    const r = 1 + wobble * sin(i * 97);
    const x = cos(a) * rx * r;
    const y = sin(a) * ry * r;
    brush.vertex(cx + x * cos(tilt) - y * sin(tilt), cy + x * sin(tilt) + y * cos(tilt));
  }
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f6efe2');
  brush.noStroke();

  // wall and cloth
  brush.fill('#e9d9bd', 80);
  brush.fillBleed(0.35, "out");
  brush.fillTexture(0.5, 0.2);
  blob(300, 170, 360, 190, 0, 0.03);
  brush.fill('#8fa3b5', 120);
  brush.fillBleed(0.3, "out");
  brush.fillTexture(0.6, 0.35);
  blob(300, 470, 380, 170, -4, 0.05);

  // cast shadows first, lemons over them
  brush.fill('#5b6b7d', 90);
  brush.fillBleed(0.2, "out");
  const lemons = [[200, 400, 85, 60, -15], [330, 420, 95, 66, 10], [440, 380, 70, 52, 25]];
  for (const [x, y, rx, ry, t] of lemons) blob(x + 20, y + 45, rx * 0.9, ry * 0.45, t, 0.05);

  for (const [x, y, rx, ry, t] of lemons) {
    brush.fill('#f2c12e', 170);
    brush.fillBleed(0.15, "out");
    brush.fillTexture(0.45, 0.4);
    blob(x, y, rx, ry, t, 0.06);
    brush.fill('#e09a1a', 110);
    brush.fillBleed(0.1, "in");
    blob(x + rx * 0.25, y + ry * 0.3, rx * 0.55, ry * 0.45, t, 0.08);
    brush.fill('#fff6c8', 120);
    brush.fillBleed(0.05, "out");
    brush.circle(x - rx * 0.35, y - ry * 0.35, ry * 0.18);
  }

  // leaves
  brush.fill('#4f7a3a', 160);
  brush.fillBleed(0.2, "out");
  brush.fillTexture(0.4, 0.5);
  for (let k = 0; k < 4; k++) {
    const a = -60 + k * 35;
    const lx = 380 + cos(a) * 70;
    const ly = 300 + sin(a) * 40;
    brush.beginShape(0.8);
    brush.vertex(380, 330);
    brush.vertex(lx - 15, ly);
    brush.vertex(lx + cos(a) * 40, ly + sin(a) * 25);
    brush.vertex(lx + 15, ly + 10);
    brush.endShape(true);
  }
}
