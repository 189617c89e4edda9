// Harbour at dusk: banded sky, a low sun, hills, boats and their reflections.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

const SKY = ['#f3c9a0', '#eeb08c', '#dc8f7a', '#b87b86', '#8c7393'];
const WATER = { deep: '#3e5a74', shallow: '#6d8ea6', glint: '#f6dcb4' };

function band(top, bottom, colour, alpha, wobble = 6) {
  brush.fill(colour, alpha);
  brush.fillBleed(0.3, 'out');
  brush.fillTexture(0.45, 0.25);
  brush.beginShape(0.3);
  for (let x = 0; x <= 600; x += 75) {
    brush.vertex(x, top + noise(x * 0.01, top) * wobble);
  }
  brush.vertex(600, bottom);
  brush.vertex(0, bottom);
  brush.endShape(true);
}

function hull(x, y, length, colour) {
  brush.fill(colour, 180);
  brush.fillBleed(0.08, 'in');
  brush.beginShape(0.1);
  brush.vertex(x, y);
  brush.vertex(x + length, y);
  brush.vertex(x + length * 0.85, y + 14);
  brush.vertex(x + length * 0.12, y + 14);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  randomSeed(11);
  brush.noStroke();

  SKY.forEach((colour, i) => band(i * 60, i * 60 + 90, colour, 110 - i * 8));

  // the sun sits low and bleeds outward into the sky
  brush.fill('#fbe3a6', 170);
  brush.fillBleed(0.5, 'out');
  brush.fillTexture(0.3, 0.1);
  brush.circle(410, 250, 46);

  // far hills, two layers
  brush.fill('#6e6a8c', 120);
  brush.fillBleed(0.2, 'out');
  brush.beginShape(0.5);
  brush.vertex(0, 300);
  for (let x = 0; x <= 600; x += 50) brush.vertex(x, 280 - 30 * sin(x * 0.8) - random(10));
  brush.vertex(600, 330);
  brush.vertex(0, 330);
  brush.endShape(true);

  brush.fill('#4f4f6f', 140);
  brush.fillBleed(0.15, 'out');
  brush.beginShape(0.4);
  brush.vertex(0, 320);
  brush.vertex(180, 295);
  brush.vertex(320, 318);
  brush.vertex(600, 300);
  brush.vertex(600, 340);
  brush.vertex(0, 340);
  brush.endShape(true);

  // water
  band(330, 600, WATER.shallow, 120, 2);
  band(420, 600, WATER.deep, 110, 4);

  // sun glints on the water
  brush.fill(WATER.glint, 120);
  brush.fillBleed(0.1, 'out');
  for (let k = 0; k < 9; k++) {
    const y = 350 + k * 22;
    const half = 40 - k * 3;
    brush.beginShape(0);
    brush.vertex(410 - half, y);
    brush.vertex(410 + half, y);
    brush.vertex(410 + half * 0.7, y + 5);
    brush.vertex(410 - half * 0.7, y + 5);
    brush.endShape(true);
  }

  // boats and their softened reflections
  const boats = [
    { x: 90, y: 380, length: 90, colour: '#2f2a35' },
    { x: 250, y: 430, length: 70, colour: '#5b2f2a' },
    { x: 470, y: 470, length: 60, colour: '#2a3a3f' },
  ];
  for (const { x, y, length, colour } of boats) {
    hull(x, y, length, colour);
    brush.fill(colour, 60);
    brush.fillBleed(0.35, 'out');
    brush.beginShape(0.6);
    brush.vertex(x + 4, y + 18);
    brush.vertex(x + length - 4, y + 18);
    brush.vertex(x + length * 0.8, y + 40);
    brush.vertex(x + length * 0.2, y + 40);
    brush.endShape(true);
    // mast as a thin tall shape, since strokes are not part of the contract
    brush.fill('#2b2630', 200);
    brush.fillBleed(0.02, 'in');
    brush.beginShape(0);
    brush.vertex(x + length / 2 - 1.5, y);
    brush.vertex(x + length / 2 + 1.5, y);
    brush.vertex(x + length / 2 + 1.5, y - length * 0.9);
    brush.vertex(x + length / 2 - 1.5, y - length * 0.9);
    brush.endShape(true);
    // sail
    brush.fill('#efe6d6', 150);
    brush.fillBleed(0.1, 'out');
    brush.beginShape(0.2);
    brush.vertex(x + length / 2 + 3, y - length * 0.85);
    brush.vertex(x + length / 2 + 3, y - 6);
    brush.vertex(x + length * 0.95, y - 6);
    brush.endShape(true);
  }

  // a few gulls as tiny dark dabs
  brush.fill('#3a3440', 160);
  brush.fillBleed(0.05, 'out');
  for (let g = 0; g < 6; g++) {
    brush.circle(120 + g * 37 + random(-8, 8), 120 + random(-30, 30), 2.5);
  }
}
