# Checks the index arithmetic of kernels/linear_mma1.cu (QLIN_MMA1) on the CPU: emulates the
# m16n8k32 fragment layouts (PTX ISA), stage_digits layout 1, the B and exchange offsets and
# the epilogue reads of one tile for every warp and several K, against direct dot products.
# Usage: python3 research/cuda/mma1_emu.py  (numpy; prints "ok")
import numpy as np, random
rng = np.random.default_rng(1)
XI_CHUNK_F4, XI_DIGIT_F4 = 224, 192
def run(K, wq):
    nu = K // 32
    R = 16
    # weights: row r, unit u: 16 bytes, byte i low nibble = element i, high = element 16+i
    qb = rng.integers(0, 256, size=(R, nu, 16), dtype=np.uint8)
    elem = np.zeros((R, nu, 32), dtype=np.int64)
    elem[:, :, :16] = qb & 15
    elem[:, :, 16:] = qb >> 4
    qflat = qb.reshape(R, nu * 16)  # row stride K/2 bytes
    # x digits: plane k, unit u, element e in [-64, 64]
    dig = rng.integers(-64, 65, size=(3, nu, 32))
    # stage layout 1 in a u32 array of bytes: chunk c (32 units) of XI_CHUNK_F4*16 bytes
    nch = (K + 1023) // 1024
    xs = np.zeros(nch * XI_CHUNK_F4 * 16, dtype=np.int8)
    for u in range(nu):
        c, uc = divmod(u, 32)
        for part in range(8):  # part: 4 elements 4*part .. 4*part+3
            for k in range(3):
                idx = ((k * 32 + uc) * 4 + (part & 3)) * 2 + (part >> 2)
                base = c * XI_CHUNK_F4 * 16 + idx * 4
                xs[base:base + 4] = dig[k, u, 4 * part:4 * part + 4]
    S_true = np.einsum('rue,kue->ruk', elem, dig)
    def b_words(g, t, u0, hh):
        bval = g < 6 and g // 3 == (t >> 1)
        if not bval:
            return [0] * 4
        # float4 index: xs + (g%3)*64 + 8*wq + 2*(t>>1) + (t&1) + bstep*s + bh*hh
        s = u0 // 32
        f4 = (g % 3) * 64 + 8 * wq + 2 * (t >> 1) + (t & 1) + XI_CHUNK_F4 * s + 4 * hh
        b = xs[f4 * 16:(f4 + 1) * 16]
        return [b[4 * i:4 * i + 4] for i in range(4)]
    def a_bytes(r, t, u0, hh):
        off = 16 * (4 * wq + (t >> 1)) + 8 * (t & 1) + 512 * (u0 // 32) + 32 * hh
        return qflat[r, off:off + 8]
    xo = lambda c: ((c // 3) * 4 + c % 3)
    for u0 in range(4 * wq, nu, 32):
        ex = np.zeros(256, dtype=np.int64)
        for hh in range(2):
            A = np.zeros((16, 32), dtype=np.int64); B = np.zeros((32, 8), dtype=np.int64)
            D = np.zeros((16, 8), dtype=np.int64)
            for m in range(2):
                A[:] = 0; B[:] = 0
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    for (row, reg) in ((g, 'a'), (g + 8, 'b')):
                        w = a_bytes(row, t, u0, hh)[4 * m:4 * m + 4]
                        lo = w & 15; hi = w >> 4
                        A[row, 4 * t:4 * t + 4] = lo
                        A[row, 16 + 4 * t:16 + 4 * t + 4] = hi
                    bw = b_words(g, t, u0, hh)
                    b0 = bw[2 * m] if not isinstance(bw[0], int) else np.zeros(4)
                    b1 = bw[2 * m + 1] if not isinstance(bw[0], int) else np.zeros(4)
                    B[4 * t:4 * t + 4, g] = b0
                    B[16 + 4 * t:16 + 4 * t + 4, g] = b1
                D += A @ B
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                x0 = xo(2 * t) if t < 3 else 3
                x1 = xo(2 * t + 1) if t < 3 else 7
                for (row, j, c) in ((g, 0, 2 * t), (g, 1, 2 * t + 1), (g + 8, 0, 2 * t), (g + 8, 1, 2 * t + 1)):
                    xoff = x0 if j == 0 else x1
                    ex[row * 16 + 8 * hh + xoff] = D[row, c]
            # columns 6,7 must be zero
            assert (D[:, 6:] == 0).all()
        for lane in range(32):
            er, ee = lane & 15, lane >> 4
            sa = ex[er * 16 + 8 * ee: er * 16 + 8 * ee + 4]
            sb = ex[er * 16 + 8 * ee + 4: er * 16 + 8 * ee + 8]
            ua = u0 + 2 * ee
            assert list(sa[:3]) == list(S_true[er, ua]), (K, wq, u0, lane, sa, S_true[er, ua])
            assert list(sb[:3]) == list(S_true[er, ua + 1]), (K, wq, u0, lane)
            # class, j, superblock and meta index
            ja = 4 * (wq & 1) + 2 * ee
            assert ua & 7 == ja and (ua + 1) & 7 == ja + 1
            assert (ua >> 3) == 4 * (u0 // 32) + (wq >> 1) == ((ua + 1) >> 3)
            assert ua % 32 == 4 * wq + 2 * ee  # class = red column and meta uc
    return True
for K in (256, 1024, 2816 - 2816 % 256, 4096, 5120):
    for wq in range(8):
        run(K, wq)
print("ok")
