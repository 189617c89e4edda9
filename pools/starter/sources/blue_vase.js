// A blue vase drawn as one shape on an empty table line.
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
  brush.fill('#b59b7a', 90);
  brush.beginShape(0.1);
  brush.vertex(0, 430); brush.vertex(600, 430); brush.vertex(600, 600); brush.vertex(0, 600);
  brush.endShape(true);
  brush.fill('#2f5d8a', 170);
  brush.fillBleed(0.05, "out");
  brush.beginShape(0.5);
  brush.vertex(270, 180); brush.vertex(330, 180); brush.vertex(345, 250);
  brush.vertex(380, 340); brush.vertex(350, 440); brush.vertex(250, 440);
  brush.vertex(220, 340); brush.vertex(255, 250);
  brush.endShape(true);
}
