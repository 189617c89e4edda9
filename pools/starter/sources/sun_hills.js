// A plain sun over two hills: three flat washes, little layering.
async function setup() {
  createCanvas(600, 600, WEBGL);
  brush.scaleBrushes(3);
  angleMode(DEGREES);
  noLoop();
}

function draw() {
  translate(-width / 2, -height / 2);
  background('#f8f1e4');
  brush.noStroke();
  brush.fill('#f2b134', 160);
  brush.fillBleed(0.1, "out");
  brush.circle(420, 170, 60);
  brush.fill('#6b9e5a', 150);
  brush.beginShape(0.3);
  brush.vertex(0, 420); brush.vertex(250, 330); brush.vertex(600, 440);
  brush.vertex(600, 600); brush.vertex(0, 600);
  brush.endShape(true);
  brush.fill('#3f6f45', 150);
  brush.beginShape(0.3);
  brush.vertex(0, 500); brush.vertex(380, 430); brush.vertex(600, 520);
  brush.vertex(600, 600); brush.vertex(0, 600);
  brush.endShape(true);
}
