import fs from "node:fs";
import path from "node:path";

export class Cart {
  constructor() {
    this.lines = [];
  }

  add(sku, qty) {
    const line = this.lines.find((l) => l.sku === sku);

    if (line) line.qty += qty;
    else this.lines.push({ sku, qty });
  }

  total(prices) {
    let sum = 0;

    for (const l of this.lines) sum += (prices[l.sku] || 0) * l.qty;

    return sum;
  }
}

function readPrices(file) {
  const text = fs.readFileSync(file, "utf8");

  return JSON.parse(text);
}

const formatMoney = (cents) => {
  const units = Math.floor(cents / 100);

  return `${units}.${String(cents % 100).padStart(2, "0")}`;
};

export function receipt(cart, file) {
  const prices = readPrices(path.resolve(file));

  return formatMoney(cart.total(prices));
}
