# Checks the index arithmetic of kernels/linear_mma1.cu (QLIN_MMA1) on the CPU: emulates the
# m16n8k32 fragment layouts (PTX ISA), stage_digits layout 1 and the B offsets of one tile for
# every warp and several K, against direct dot products; then the class, j, super-block and
# meta indices each lane uses. Usage: python3 research/cuda/mma1_emu.py (numpy; prints "ok")
import numpy as np
rng = np.random.default_rng(1)
XI_CHUNK_F4, XI_DIGIT_F4 = 224, 192
def run(K, wq):
    nu, R = K // 32, 16
    qb = rng.integers(0, 256, size=(R, nu, 16), dtype=np.uint8)  # byte i: lo = elem i, hi = 16+i
    elem = np.zeros((R, nu, 32), dtype=np.int64)
    elem[:, :, :16], elem[:, :, 16:] = qb & 15, qb >> 4
    qflat = qb.reshape(R, nu * 16)
    dig = rng.integers(-64, 65, size=(3, nu, 32))
    nch = (K + 1023) // 1024
    xs = np.zeros(nch * XI_CHUNK_F4 * 16, dtype=np.int8)  # stage_digits layout 1
    for u in range(nu):
        c, uc = divmod(u, 32)
        for part in range(8):
            for k in range(3):
                idx = ((k * 32 + uc) * 4 + (part & 3)) * 2 + (part >> 2)
                b = c * XI_CHUNK_F4 * 16 + idx * 4
                xs[b:b + 4] = dig[k, u, 4 * part:4 * part + 4]
    S_true = np.einsum('rue,kue->ruk', elem, dig)
    def f4(i):  # float4 i of xs as four u32 words (each 4 int8)
        b = xs[i * 16:(i + 1) * 16]
        return [b[4 * w:4 * w + 4] for w in range(4)]
    zero = [np.zeros(4, dtype=np.int8)] * 4
    for u0 in range(4 * wq, nu, 32):
        s = u0 // 32
        DX = np.zeros((16, 8), dtype=np.int64); DY = np.zeros((16, 8), dtype=np.int64)
        for c in range(4):
            A = np.zeros((16, 32), dtype=np.int64)
            BX = np.zeros((32, 8), dtype=np.int64); BY = np.zeros((32, 8), dtype=np.int64)
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                uc0 = 4 * wq + t
                for row in (g, g + 8):
                    off = 16 * uc0 + 512 * s
                    w = qflat[row, off + 4 * c:off + 4 * c + 4]
                    A[row, 4 * t:4 * t + 4] = w & 15
                    A[row, 16 + 4 * t:16 + 4 * t + 4] = w >> 4
                xval = t == (g >> 1); yval = xval and (g & 1) == 0
                bx = f4(((g & 1) * 32 + uc0) * 2 + XI_CHUNK_F4 * s + (c >> 1)) if xval else zero
                by = f4((2 * 32 + uc0) * 2 + XI_CHUNK_F4 * s + (c >> 1)) if yval else zero
                lo, hi = (2, 3) if c & 1 else (0, 1)
                BX[4 * t:4 * t + 4, g], BX[16 + 4 * t:16 + 4 * t + 4, g] = bx[lo], bx[hi]
                BY[4 * t:4 * t + 4, g], BY[16 + 4 * t:16 + 4 * t + 4, g] = by[lo], by[hi]
            DX += A @ BX; DY += A @ BY
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            u = u0 + t
            for row, (i0, i1) in ((g, (0, 1)), (g + 8, (2, 3))):
                # d[0], d[1]: (row g, cols 2t, 2t+1); d[2], d[3]: row g + 8
                got = [DX[row, 2 * t], DX[row, 2 * t + 1], DY[row, 2 * t]]
                assert got == list(S_true[row, u]), (K, wq, u0, lane, got, S_true[row, u])
                assert DY[row, 2 * t + 1] == 0
            assert u & 7 == 4 * (wq & 1) + t           # j
            assert u >> 3 == 4 * s + (wq >> 1)          # super-block of the header
            assert u % 32 == 4 * wq + t                 # class (red column) and meta index
for K in (256, 1024, 2560, 4096, 5120):
    for wq in range(8):
        run(K, wq)
print("ok")
