use std::collections::HashMap;
use std::fmt;

pub struct Ledger {
    balances: HashMap<String, i64>,
}

pub enum Entry {
    Credit(i64),
    Debit(i64),
}

pub trait Audit {
    fn audit(&self) -> bool;
}

impl Ledger {
    pub fn new() -> Self {
        Ledger { balances: HashMap::new() }
    }

    pub fn apply(&mut self, who: &str, entry: Entry) {
        let balance = self.balances.entry(who.to_string()).or_insert(0);

        match entry {
            Entry::Credit(n) => *balance += n,
            Entry::Debit(n) => *balance -= n,
        }
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} accounts", self.balances.len())
    }
}
