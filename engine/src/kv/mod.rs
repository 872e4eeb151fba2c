//! Paged KV cache bookkeeping, independent of where the K/V bytes live (the backend owns those).
//!
//! The cache is `num_blocks` fixed-size blocks of `block_size` token positions. A sequence's block
//! table maps its logical block `i` (positions `i*block_size ..`) to a physical block. Blocks are
//! reference-counted so forks (n > 1, speculative rollback) and prefix-cache hits share them; a
//! shared block is copied before it is written (copy-on-write). Design after vLLM's PagedAttention
//! (Kwon et al., SOSP 2023).

pub mod prefix;

use crate::error::{Error, Result};

/// Physical block allocator with reference counts.
#[derive(Debug)]
pub struct BlockManager {
    block_size: usize,
    free: Vec<u32>,
    refcount: Vec<u32>,
}

/// A sequence's logical → physical block mapping plus its length in tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockTable {
    pub blocks: Vec<u32>,
    /// Token positions whose K/V are (or are about to be) written.
    pub len: usize,
}

impl BlockManager {
    /// `num_blocks` blocks of `block_size` positions each.
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        assert!(block_size > 0);
        BlockManager {
            block_size,
            // Pop from the end: hand out low block ids first.
            free: (0..num_blocks as u32).rev().collect(),
            refcount: vec![0; num_blocks],
        }
    }
    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }
    /// Blocks not referenced by any table.
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }
    /// Total blocks.
    pub fn num_blocks(&self) -> usize {
        self.refcount.len()
    }
    /// Blocks needed to hold `tokens` positions.
    pub fn blocks_for(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.block_size)
    }

    /// Grows `table` so it can hold `new_len` positions. Errors with [`Error::KvExhausted`] and
    /// changes nothing if there are not enough free blocks.
    pub fn reserve(&mut self, table: &mut BlockTable, new_len: usize) -> Result<()> {
        let need = self.blocks_for(new_len).saturating_sub(table.blocks.len());
        if need > self.free.len() {
            return Err(Error::KvExhausted {
                needed: need,
                free: self.free.len(),
            });
        }
        for _ in 0..need {
            let b = self.free.pop().expect("checked");
            self.refcount[b as usize] = 1;
            table.blocks.push(b);
        }
        table.len = table.len.max(new_len);
        Ok(())
    }

    /// A new table sharing every block of `table` (reference counts incremented).
    pub fn fork(&mut self, table: &BlockTable) -> BlockTable {
        for &b in &table.blocks {
            self.refcount[b as usize] += 1;
        }
        table.clone()
    }

    /// Drops positions from `new_len` on, releasing blocks no longer needed.
    pub fn truncate(&mut self, table: &mut BlockTable, new_len: usize) {
        let keep = self.blocks_for(new_len);
        while table.blocks.len() > keep {
            let b = table.blocks.pop().expect("non-empty");
            self.release(b);
        }
        table.len = table.len.min(new_len);
    }

    /// Releases every block of `table`.
    pub fn free_table(&mut self, table: &mut BlockTable) {
        self.truncate(table, 0);
    }

    /// Takes one more reference on `block` (a prefix-cache entry, a shared prefix).
    pub fn retain(&mut self, block: u32) {
        debug_assert!(
            self.refcount[block as usize] > 0,
            "retain of free block {block}"
        );
        self.refcount[block as usize] += 1;
    }

    /// Allocates one block with reference count 1, if any is free.
    pub fn allocate(&mut self) -> Option<u32> {
        let b = self.free.pop()?;
        self.refcount[b as usize] = 1;
        Some(b)
    }

    /// Drops one reference on `block`; it returns to the free list at zero.
    pub fn release(&mut self, b: u32) {
        let rc = &mut self.refcount[b as usize];
        debug_assert!(*rc > 0, "double free of block {b}");
        *rc -= 1;
        if *rc == 0 {
            self.free.push(b);
        }
    }

    /// Reference count of a physical block.
    pub fn refcount(&self, block: u32) -> u32 {
        self.refcount[block as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_fork_truncate_free() {
        let mut m = BlockManager::new(4, 16);
        let mut t = BlockTable::default();
        m.reserve(&mut t, 17).unwrap();
        assert_eq!(t.blocks, vec![0, 1]);
        assert_eq!(m.free_blocks(), 2);
        let mut f = m.fork(&t);
        assert_eq!(m.refcount(0), 2);
        m.truncate(&mut t, 16);
        assert_eq!(t.blocks, vec![0]);
        assert_eq!(m.free_blocks(), 2, "block 1 still held by the fork");
        m.free_table(&mut f);
        assert_eq!(m.free_blocks(), 3);
        m.free_table(&mut t);
        assert_eq!(m.free_blocks(), 4);
        let mut big = BlockTable::default();
        let e = m.reserve(&mut big, 16 * 5).unwrap_err();
        assert!(matches!(e, Error::KvExhausted { needed: 5, free: 4 }));
        assert!(big.blocks.is_empty() && m.free_blocks() == 4);
    }
}
