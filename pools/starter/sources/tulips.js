// A jar of tulips against a soft lilac wash: cup-shaped petals, long leaves, glass jar.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

function cupPetal(x, y, w, h, lean, colour, alpha) {
  brush.fill(colour, alpha);
  brush.fillBleed(0.2, "out");
  brush.fillTexture(0.5, 0.45);
  brush.beginShape(0.75);
  brush.vertex(x - w / 2, y);
  brush.vertex(x - w / 2 + lean, y - h * 0.7);
  brush.vertex(x + lean, y - h);
  brush.vertex(x + w / 2 + lean, y - h * 0.7);
  brush.vertex(x + w / 2, y);
  brush.vertex(x, y + h * 0.15);
  brush.endShape(true);
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f7f0e6');
  randomSeed(11);
  brush.noStroke();

  brush.fill('#c9b6d9', 70);
  brush.fillBleed(0.45, "out");
  brush.fillTexture(0.55, 0.2);
  brush.beginShape(0.5);
  brush.vertex(40, 40); brush.vertex(560, 60); brush.vertex(540, 430); brush.vertex(60, 450);
  brush.endShape(true);

  const heads = [[230, 200, '#d8334a'], [300, 160, '#f08a3c'], [370, 210, '#d8334a'], [270, 250, '#f4c2d0'], [340, 260, '#f08a3c']];

  // stems and leaves
  brush.fill('#4d7d45', 150);
  brush.fillBleed(0.15, "out");
  for (const [x, y] of heads) {
    brush.beginShape(0.2);
    brush.vertex(x - 3, y); brush.vertex(x + 3, y);
    brush.vertex(300 + (x - 300) * 0.2 + 4, 440); brush.vertex(300 + (x - 300) * 0.2 - 4, 440);
    brush.endShape(true);
  }
  for (let k = 0; k < 4; k++) {
    const side = k % 2 ? 1 : -1;
    brush.beginShape(0.8);
    brush.vertex(300, 440);
    brush.vertex(300 + side * (60 + k * 12), 300 + k * 10);
    brush.vertex(300 + side * (20 + k * 5), 380);
    brush.endShape(true);
  }

  // flowers: two petals each, the darker one behind
  for (const [x, y, c] of heads) {
    cupPetal(x - 8, y, 46, 60, -4, c, 150);
    cupPetal(x + 8, y + 4, 40, 52, 5, c, 120);
  }

  // glass jar and its shadow
  brush.fill('#9fb9c4', 70);
  brush.fillBleed(0.25, "out");
  brush.fillTexture(0.3, 0.6);
  brush.beginShape(0.4);
  brush.vertex(240, 400); brush.vertex(360, 400); brush.vertex(375, 540); brush.vertex(225, 540);
  brush.endShape(true);
  brush.fill('#6d6480', 60);
  brush.beginShape(0.6);
  brush.vertex(230, 545); brush.vertex(450, 535); brush.vertex(430, 565); brush.vertex(240, 570);
  brush.endShape(true);
}
