// Koi pond seen from above: lily pads, drifting koi built from a small class.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

class Koi {
  static palette = ['#e4572e', '#f3a712', '#f4f1e8'];
  #scaleCount = 6;

  constructor(x, y, heading, size, pattern = 0) {
    this.x = x;
    this.y = y;
    this.heading = heading;
    this.size = size;
    this.pattern = pattern;
  }

  point(along, across) {
    const { x, y, heading } = this;
    return [
      x + cos(heading) * along - sin(heading) * across,
      y + sin(heading) * along + cos(heading) * across,
    ];
  }

  body() {
    const s = this.size;
    brush.fill(Koi.palette[this.pattern % 3], 170);
    brush.fillBleed(0.12, 'out');
    brush.fillTexture(0.3, 0.4);
    brush.beginShape(0.4);
    for (let t = -1; t <= 1; t += 0.25) {
      const [px, py] = this.point(t * s, (1 - t * t) * s * 0.32);
      brush.vertex(px, py);
    }
    for (let t = 1; t >= -1; t -= 0.25) {
      const [px, py] = this.point(t * s, -(1 - t * t) * s * 0.32);
      brush.vertex(px, py);
    }
    brush.endShape(true);
  }

  spots() {
    brush.fill(Koi.palette[(this.pattern + 1) % 3], 190);
    brush.fillBleed(0.05, 'in');
    for (let i = 0; i < this.#scaleCount; i++) {
      const [px, py] = this.point(map(i, 0, this.#scaleCount, -0.6, 0.7) * this.size, random(-4, 4));
      brush.circle(px, py, this.size * random(0.08, 0.14));
    }
  }

  tail() {
    const s = this.size;
    brush.fill(Koi.palette[this.pattern % 3], 120);
    brush.fillBleed(0.25, 'out');
    brush.beginShape(0.5);
    brush.vertex(...this.point(-s * 0.95, 0));
    brush.vertex(...this.point(-s * 1.45, s * 0.35));
    brush.vertex(...this.point(-s * 1.3, 0));
    brush.vertex(...this.point(-s * 1.45, -s * 0.35));
    brush.endShape(true);
  }

  paint() {
    this.tail();
    this.body();
    this.spots();
  }
}

function lilyPad(cx, cy, r, notch) {
  brush.fill(r > 40 ? '#5d8a4a' : '#7aa35a', 150);
  brush.fillBleed(0.2, 'out');
  brush.fillTexture(0.5, 0.3);
  brush.beginShape(0.3);
  brush.vertex(cx, cy);
  for (let a = notch + 20; a <= notch + 340; a += 40) {
    brush.vertex(cx + cos(a) * r, cy + sin(a) * r);
  }
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  randomSeed(3);
  noiseSeed(3);
  brush.noStroke();

  // deep water with lighter eddies
  brush.fill('#2f5d6b', 110);
  brush.fillBleed(0.4, 'out');
  brush.fillTexture(0.6, 0.3);
  brush.beginShape(0.2);
  brush.vertex(20, 20); brush.vertex(580, 30); brush.vertex(570, 580); brush.vertex(30, 570);
  brush.endShape(true);

  const eddies = Array.from({ length: 5 }, (_, i) => ({ x: 80 + i * 110, y: 100 + (i % 2) * 300 }));
  brush.fill('#4f8291', 70);
  brush.fillBleed(0.5, 'out');
  for (const e of eddies) brush.circle(e.x, e.y, 60 + noise(e.x, e.y) * 40);

  const koi = [
    new Koi(200, 220, 30, 55, 0),
    new Koi(380, 330, 200, 48, 1),
    new Koi(300, 460, 300, 40, 2),
    new Koi(460, 150, 120, 36, 0),
  ];
  koi.forEach(fish => fish.paint());

  const pads = [[110, 420, 52, 10], [480, 470, 38, 200], [150, 120, 30, 90], [520, 260, 44, 300]];
  for (const [cx, cy, r, notch] of pads) lilyPad(cx, cy, r, notch);

  // a single lotus bloom on the largest pad
  const petals = 8;
  for (let p = 0; p < petals; p++) {
    const angle = (360 / petals) * p;
    brush.fill(p % 2 === 0 ? '#f2b5c4' : '#f7d3dc', 160);
    brush.fillBleed(0.1, 'out');
    brush.beginShape(0.4);
    brush.vertex(110, 410);
    brush.vertex(110 + cos(angle - 12) * 22, 410 + sin(angle - 12) * 22);
    brush.vertex(110 + cos(angle) * 30, 410 + sin(angle) * 30);
    brush.vertex(110 + cos(angle + 12) * 22, 410 + sin(angle + 12) * 22);
    brush.endShape(true);
  }
  brush.fill('#f3d36b', 200);
  brush.fillBleed(0.05, 'in');
  brush.circle(110, 410, 6);

  // shadows of the koi on the pond floor, offset down and to the right
  brush.fill('#1f3d48', 45);
  brush.fillBleed(0.35, 'out');
  for (const fish of koi) {
    const [sx, sy] = fish.point(0, 0);
    brush.circle(sx + 8, sy + 10, fish.size * 0.5);
  }

  // light ripples: pale translucent rings approximated by thin wedges
  brush.fill('#dfeef0', 50);
  brush.fillBleed(0.3, 'out');
  for (const fish of koi) {
    const [rx, ry] = fish.point(fish.size * 1.4, 0);
    brush.circle(rx, ry, fish.size * 0.3);
  }
  brush.noFill();
}
