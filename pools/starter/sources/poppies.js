// Three red poppies in a meadow: layered washes, soft bleeds, a few dark centres.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

function petal(cx, cy, r, angle, colour) {
  brush.fill(colour, 150);
  brush.fillBleed(0.25, "out");
  brush.fillTexture(0.5, 0.3);
  brush.beginShape(0.6);
  for (let i = 0; i < 7; i++) {
    const a = angle - 40 + i * (80 / 6);
    const rr = r * (0.55 + 0.45 * sin(i * 30));
    brush.vertex(cx + cos(a) * rr, cy + sin(a) * rr);
  }
  brush.vertex(cx, cy);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  randomSeed(7);
  brush.noStroke();

  // sky and meadow washes
  brush.fill('#cfe0ea', 90);
  brush.fillBleed(0.4, "out");
  brush.fillTexture(0.4, 0.2);
  brush.beginShape(0.2);
  brush.vertex(0, 0); brush.vertex(600, 0); brush.vertex(600, 330); brush.vertex(0, 360);
  brush.endShape(true);

  brush.fill('#9bb870', 120);
  brush.fillBleed(0.3, "out");
  brush.beginShape(0.4);
  brush.vertex(0, 330); brush.vertex(300, 300); brush.vertex(600, 320);
  brush.vertex(600, 600); brush.vertex(0, 600);
  brush.endShape(true);

  // stems
  brush.fill('#5f7d3a', 170);
  brush.fillBleed(0.1, "out");
  const flowers = [[180, 250, 70], [360, 200, 85], [470, 330, 60]];
  for (const [x, y, r] of flowers) {
    brush.beginShape(0.3);
    brush.vertex(x - 4, y); brush.vertex(x + 4, y);
    brush.vertex(x + 10, 600); brush.vertex(x, 600);
    brush.endShape(true);
  }

  // petals
  for (const [x, y, r] of flowers) {
    for (let k = 0; k < 5; k++) {
      petal(x, y, r, k * 72 + random(-10, 10), k % 2 ? '#d6362b' : '#e85a3c');
    }
  }

  // dark centres
  brush.fill('#2b2230', 200);
  brush.fillBleed(0.05, "out");
  brush.fillTexture(0.2, 0.6);
  for (const [x, y, r] of flowers) {
    brush.circle(x, y, r * 0.18);
  }
}
