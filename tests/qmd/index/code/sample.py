"""A small inventory module: enough definitions to need several chunks."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    name: str
    count: int = 0
    tags: list[str] = field(default_factory=list)

    def restock(self, amount: int) -> None:
        if amount <= 0:
            raise ValueError("amount must be positive")

        self.count += amount

    def describe(self) -> str:
        tags = ", ".join(self.tags) or "untagged"

        return f"{self.name}: {self.count} ({tags})"


def load_items(path: Path) -> list[Item]:
    data = json.loads(path.read_text())

    items = []
    for row in data:
        items.append(Item(row["name"], row.get("count", 0), row.get("tags", [])))

    return items


def save_items(path: Path, items: list[Item]) -> None:
    rows = [{"name": i.name, "count": i.count, "tags": i.tags} for i in items]

    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=2))

    os.replace(tmp, path)


def low_stock(items: list[Item], threshold: int = 3) -> list[Item]:
    low = [i for i in items if i.count < threshold]

    low.sort(key=lambda i: i.count)

    return low
