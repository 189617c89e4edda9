// Mountain lake: layered ridges, pines drawn with a self-made `line` helper, mist.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

const ridgeColours = ['#9aa7c0', '#7c8bab', '#5e6f91', '#445674'];

// p5 has a line() of its own; this sketch shadows it with a watercolour version.
function line(x1, y1, x2, y2, thickness, colour) {
  const angle = atan2(y2 - y1, x2 - x1);
  const dx = -sin(angle) * thickness / 2;
  const dy = cos(angle) * thickness / 2;
  brush.fill(colour, 190);
  brush.fillBleed(0.02, 'in');
  brush.beginShape(0);
  brush.vertex(x1 + dx, y1 + dy);
  brush.vertex(x2 + dx, y2 + dy);
  brush.vertex(x2 - dx, y2 - dy);
  brush.vertex(x1 - dx, y1 - dy);
  brush.endShape(true);
}

const ridge = (baseY, height, colour, seed) => {
  brush.fill(colour, 130);
  brush.fillBleed(0.25, 'out');
  brush.fillTexture(0.4, 0.3);
  brush.beginShape(0.5);
  brush.vertex(0, 600);
  for (let x = 0; x <= 600; x += 30) {
    const y = baseY - height * noise(x * 0.006, seed) - height * 0.3 * abs(sin(x + seed * 40));
    brush.vertex(x, constrain(y, 40, 560));
  }
  brush.vertex(600, 600);
  brush.endShape(true);
};

function pine(x, baseY, h) {
  line(x, baseY, x, baseY - h, 3, '#3b2f2a');
  const tiers = floor(h / 14);
  for (let t = 0; t < tiers; t++) {
    const y = baseY - h * 0.2 - t * (h * 0.8 / tiers);
    const w = lerp(h * 0.35, 4, t / max(1, tiers - 1));
    brush.fill(t % 2 ? '#2f4a3a' : '#365543', 170);
    brush.fillBleed(0.08, 'out');
    brush.beginShape(0.2);
    brush.vertex(x - w, y);
    brush.vertex(x + w, y);
    brush.vertex(x, y - h * 0.22);
    brush.endShape(true);
  }
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  randomSeed(42);
  noiseSeed(42);
  brush.noStroke();

  // sky wash
  brush.fill('#d7e3ee', 100);
  brush.fillBleed(0.45, 'out');
  brush.fillTexture(0.5, 0.2);
  brush.beginShape(0.1);
  brush.vertex(0, 0); brush.vertex(600, 0); brush.vertex(600, 320); brush.vertex(0, 320);
  brush.endShape(true);

  // snowy peak
  brush.fill('#eef1f5', 160);
  brush.fillBleed(0.1, 'out');
  brush.beginShape(0.3);
  brush.vertex(180, 260); brush.vertex(300, 90); brush.vertex(420, 250);
  brush.endShape(true);

  ridgeColours.forEach((colour, i) => ridge(250 + i * 40, 120 - i * 18, colour, i + 1));

  // the lake mirrors the sky in a cooler key
  brush.fill('#8fb0c8', 120);
  brush.fillBleed(0.3, 'out');
  brush.beginShape(0.3);
  brush.vertex(0, 430); brush.vertex(600, 420); brush.vertex(600, 600); brush.vertex(0, 600);
  brush.endShape(true);

  brush.fill('#b9cfdd', 80);
  brush.fillBleed(0.4, 'out');
  for (let i = 0; i < 5; i++) {
    const y = 450 + i * 28;
    line(60 + random(40), y, 540 - random(40), y + random(-2, 2), 2 + i * 0.5, '#cfe0ea');
  }

  // pines on the near shore, tallest at the edges
  for (let x = 20; x < 600; x += 38) {
    const edge = abs(x - 300) / 300;
    pine(x + random(-8, 8), 440 + random(6), 50 + edge * 70 + random(20));
  }

  // morning mist drifting over the middle ridges
  brush.fill('#f4f1ec', 90);
  brush.fillBleed(0.6, 'out');
  brush.fillTexture(0.2, 0.1);
  for (const [mx, my, mr] of [[150, 330, 70], [330, 345, 90], [500, 325, 60]]) {
    brush.circle(mx, my, mr);
  }

  // a small red canoe gives the eye somewhere to land
  brush.fill('#b23a2e', 200);
  brush.fillBleed(0.05, 'in');
  brush.beginShape(0.1);
  brush.vertex(360, 500); brush.vertex(430, 500); brush.vertex(420, 508); brush.vertex(372, 508);
  brush.endShape(true);
  brush.fill('#7c2a22', 80);
  brush.fillBleed(0.3, 'out');
  brush.circle(395, 515, 12);
}
