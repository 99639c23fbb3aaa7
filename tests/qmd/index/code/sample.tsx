import React from "react";
import { useState } from "react";

type Props = { label: string };

export function Counter({ label }: Props) {
  const [n, setN] = useState(0);

  return (
    <button onClick={() => setN(n + 1)}>
      {label}: {n}
    </button>
  );
}

export const Title = ({ label }: Props) => {
  const upper = label.toUpperCase();

  return <h1>{upper}</h1>;
};

export function List({ items }: { items: string[] }) {
  const sorted = [...items].sort();

  return (
    <ul>
      {sorted.map((item) => (
        <li key={item}>{item}</li>
      ))}
    </ul>
  );
}
