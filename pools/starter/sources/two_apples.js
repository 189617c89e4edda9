// Two apples side by side, one wash each, no shadow or ground.
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
  brush.fill('#c0392b', 170);
  brush.fillBleed(0.1, "out");
  brush.circle(230, 320, 90);
  brush.fill('#8fb339', 170);
  brush.circle(390, 330, 80);
}
