// Fused resample + colour conversion + normalisation + quantisation + packing.
//
// The render target is RGBA8: every texel holds 4 consecutive BYTES of one destination
// row (of one plane for planar outputs), so any destination element type and layout
// (3-byte RGB, CHW planes, i8, f16, f32) is produced by the GPU and read back, or
// rendered into a dma-buf, without another pass. The source is sampled with texelFetch
// only (exact bytes, no driver filtering or YUV sampler). The taps and bilinear weights
// are the plan's own (computed once on the CPU in f64 and handed over as a table), so
// the GL and CPU backends read the same source pixels with the same weights; the shader
// interpolates in the source's own domain (replicated chroma), applies the plan's colour
// matrix, clamps once, then normalises and packs (src/convert/plan.rs, rules 1-5).
//
// Sources of more than 8 bits arrive as R8/RG8/RGBA8 texels of their bytes; each byte is
// recovered exactly with round(t * 255) and the codes are assembled in integer arithmetic,
// so a 16-bit code is never approximated by a normalized float. A Bayer source runs the
// plan's RAW steps (black level and gains with the clip, Malvar-He-Cutler demosaic over
// mirrored borders, colour matrix with the clip, gamma, x255) per source pixel in
// fetch_src, before the taps mix pixels, exactly as src/convert/plan.rs orders them.
//
// Exactly one SRC_* macro is defined by the program builder.
precision highp float;
precision highp int;
precision highp sampler2D;

uniform sampler2D u_plane0;
uniform sampler2D u_plane1;
uniform sampler2D u_plane2;

// Geometry, straight from the plan: an RGBA32F table, row 0 for source columns and row 1
// for source rows, each texel (i0, i1, weight of i1, 0) for one destination index (the
// destination column, or the row when u_transposed). Taps are already clamped to the crop.
uniform highp sampler2D u_taps;
uniform int u_transposed;
// Destination pixels that show the image: x0, y0, x1, y1 (exclusive); others get u_pad.
uniform ivec4 u_valid;
// Source byte selection (one-hot masks over a texel's 4 bytes).
uniform vec4 u_sel0;   // packed 4:2:2: Y0; RGBA: R
uniform vec4 u_sel1;   // packed 4:2:2: U;  RGBA: G; semi-planar: U (in .xy)
uniform vec4 u_sel2;   // packed 4:2:2: Y1; RGBA: B
uniform vec4 u_sel3;   // packed 4:2:2: V;  semi-planar: V (in .xy)
uniform ivec3 u_rgb_pos; // 3-byte RGB sources: byte position of R, G, B
uniform int u_chroma_vshift; // 1 for 4:2:0, 0 for 4:2:2 and 4:4:4
uniform int u_chroma_hshift; // 1 for 4:2:x, 0 for 4:4:4 (planar YUV)
// Colour, from the plan: output channel c = dot(u_colorN.xyz, s) + u_colorN.w.
uniform vec4 u_color0;
uniform vec4 u_color1;
uniform vec4 u_color2;
// Destination.
uniform vec4 u_pad;       // 0..255 per output channel; .w unused
uniform int u_dtype;      // 0 u8, 1 i8, 2 f16, 3 f32
uniform int u_chans;      // elements per pixel in a packed row (1, 3, 4); 1 when planar
uniform int u_planar;     // 1: target rows [p*h, (p+1)*h) are plane p
uniform int u_height;     // destination height (rows per plane)
uniform int u_row0;       // the target row this image starts at (a slice of a batch)
uniform int u_width;      // destination width in pixels
uniform ivec4 u_map;      // element c of a pixel (or plane c) -> output channel 0..2, 3 alpha
uniform vec3 u_scale;     // the plan's out_scale/out_bias: y = v * scale + bias, per output
uniform vec3 u_bias;      // channel; floats store y, u8 round(clamp(y)), i8 that XOR 0x80
// Deep and RAW sources.
uniform ivec2 u_src_size; // source width and height in pixels (the mirror's bounds)
uniform int u_white;      // 2^bits - 1: codes above it are clipped to it
// RAW, indexed by the position in the 2x2 CFA tile, ((y & 1) << 1) | (x & 1):
uniform ivec4 u_tile_site; // the site there: 0 R, 1 Gr, 2 Gb, 3 B
uniform vec4 u_black;      // its black level
uniform vec4 u_gain;       // its gain[colour] / (white - black)
uniform vec3 u_ccm0;       // colour-correction matrix rows (output R, G, B)
uniform vec3 u_ccm1;
uniform vec3 u_ccm2;
uniform int u_srgb;        // 1: sRGB curve after the matrix, 0: linear

out vec4 o_bytes;

#if defined(SRC_BAYER8) || defined(SRC_BAYER16) || defined(SRC_BAYER10P) || defined(SRC_BAYER12P)
#define SRC_BAYER
#endif

// The byte a unorm texel channel holds (exact: t is byte / 255).
int byte_of(float t) {
    return int(round(t * 255.0));
}

#if defined(SRC_BAYER8)
int raw_code(ivec2 p) {
    return byte_of(texelFetch(u_plane0, p, 0).r);
}
#elif defined(SRC_BAYER16)
int raw_code(ivec2 p) {
    vec2 t = texelFetch(u_plane0, p, 0).rg;
    return byte_of(t.x) | (byte_of(t.y) << 8);
}
#elif defined(SRC_BAYER10P)
// CSI-2 RAW10: bytes 0..3 are the high 8 bits of pixels 0..3, byte 4 their low 2 bits.
int raw_code(ivec2 p) {
    int g = (p.x >> 2) * 5;
    int k = p.x & 3;
    int hi = byte_of(texelFetch(u_plane0, ivec2(g + k, p.y), 0).r);
    int lo = byte_of(texelFetch(u_plane0, ivec2(g + 4, p.y), 0).r);
    return (hi << 2) | ((lo >> (2 * k)) & 3);
}
#elif defined(SRC_BAYER12P)
// CSI-2 RAW12: bytes 0, 1 are the high 8 bits of pixels 0, 1, byte 2 their low 4 bits.
int raw_code(ivec2 p) {
    int g = (p.x >> 1) * 3;
    int k = p.x & 1;
    int hi = byte_of(texelFetch(u_plane0, ivec2(g + k, p.y), 0).r);
    int lo = byte_of(texelFetch(u_plane0, ivec2(g + 2, p.y), 0).r);
    return (hi << 4) | ((lo >> (4 * k)) & 15);
}
#endif

#if defined(SRC_BAYER)
// Mirrors i into 0..n-1 without repeating the edge (-1 -> 1, n -> n - 2); the second abs
// folds the overshoot of a 5x5 neighbourhood on a 2-pixel image back in. It keeps the
// parity of i, so a mirrored neighbour has the colour the unmirrored one would have.
int mirror(int i, int n) {
    i = abs(i);
    if (i >= n) {
        i = 2 * (n - 1) - i;
    }
    return abs(i);
}

// The black-levelled, white-balanced, clipped sample at p + d (0..1).
float raw_v(ivec2 p, ivec2 d) {
    ivec2 q = ivec2(mirror(p.x + d.x, u_src_size.x), mirror(p.y + d.y, u_src_size.y));
    int t = ((q.y & 1) << 1) | (q.x & 1);
    float code = float(min(raw_code(q), u_white));
    return clamp((code - u_black[t]) * u_gain[t], 0.0, 1.0);
}

vec3 fetch_src(ivec2 p) {
    float c = raw_v(p, ivec2(0, 0));
    float l1 = raw_v(p, ivec2(-1, 0));
    float r1 = raw_v(p, ivec2(1, 0));
    float u1 = raw_v(p, ivec2(0, -1));
    float d1 = raw_v(p, ivec2(0, 1));
    float h2 = raw_v(p, ivec2(-2, 0)) + raw_v(p, ivec2(2, 0));
    float v2 = raw_v(p, ivec2(0, -2)) + raw_v(p, ivec2(0, 2));
    float diag = raw_v(p, ivec2(-1, -1)) + raw_v(p, ivec2(1, -1)) + raw_v(p, ivec2(-1, 1)) +
                 raw_v(p, ivec2(1, 1));
    // Malvar-He-Cutler, in eighths. Green at a red or blue site:
    float green = (4.0 * c + 2.0 * (l1 + r1 + u1 + d1) - (h2 + v2)) / 8.0;
    // Red or blue at a blue or red site (its diagonal neighbours):
    float across = (6.0 * c + 2.0 * diag - 1.5 * (h2 + v2)) / 8.0;
    // Red or blue at a green site, from left and right / from above and below:
    float beside = (5.0 * c + 4.0 * (l1 + r1) - h2 - diag + 0.5 * v2) / 8.0;
    float above = (5.0 * c + 4.0 * (u1 + d1) - v2 - diag + 0.5 * h2) / 8.0;
    int site = u_tile_site[((p.y & 1) << 1) | (p.x & 1)];
    vec3 rgb;
    if (site == 0) {
        rgb = vec3(c, green, across);
    } else if (site == 3) {
        rgb = vec3(across, green, c);
    } else if (site == 1) {
        // Green on a red row: red left and right, blue above and below.
        rgb = vec3(beside, c, above);
    } else {
        rgb = vec3(above, c, beside);
    }
    vec3 m = clamp(vec3(dot(u_ccm0, rgb), dot(u_ccm1, rgb), dot(u_ccm2, rgb)), 0.0, 1.0);
    if (u_srgb == 1) {
        vec3 curve = 1.055 * pow(m, vec3(1.0 / 2.4)) - 0.055;
        m = mix(curve, 12.92 * m, lessThanEqual(m, vec3(0.0031308)));
    }
    return m * 255.0;
}
#elif defined(SRC_DEEPGREY)
// Y10/Y12/Y16: 255 * min(word, white) / white.
vec3 fetch_src(ivec2 p) {
    vec2 t = texelFetch(u_plane0, p, 0).rg;
    int code = min(byte_of(t.x) | (byte_of(t.y) << 8), u_white);
    return vec3(255.0 * float(code) / float(u_white));
}
#elif defined(SRC_SEMIPLANAR16)
// P010/P012/P016: each word / 256 (8-bit units), i.e. high byte + low byte / 256 (exact).
vec3 fetch_src(ivec2 p) {
    vec2 y = round(texelFetch(u_plane0, p, 0).rg * 255.0);
    vec4 c = round(texelFetch(u_plane1, ivec2(p.x >> 1, p.y >> 1), 0) * 255.0);
    return vec3(y.y + y.x / 256.0, c.y + c.x / 256.0, c.w + c.z / 256.0);
}
#elif defined(SRC_PACKED422)
vec3 fetch_src(ivec2 p) {
    vec4 t = texelFetch(u_plane0, ivec2(p.x >> 1, p.y), 0) * 255.0;
    float y = ((p.x & 1) == 0) ? dot(t, u_sel0) : dot(t, u_sel2);
    return vec3(y, dot(t, u_sel1), dot(t, u_sel3));
}
#elif defined(SRC_SEMIPLANAR)
vec3 fetch_src(ivec2 p) {
    float y = texelFetch(u_plane0, p, 0).r * 255.0;
    vec2 c = texelFetch(u_plane1, ivec2(p.x >> 1, p.y >> u_chroma_vshift), 0).rg * 255.0;
    return vec3(y, dot(c, u_sel1.xy), dot(c, u_sel3.xy));
}
#elif defined(SRC_PLANAR)
vec3 fetch_src(ivec2 p) {
    ivec2 c = ivec2(p.x >> u_chroma_hshift, p.y >> u_chroma_vshift);
    return vec3(texelFetch(u_plane0, p, 0).r, texelFetch(u_plane1, c, 0).r,
                texelFetch(u_plane2, c, 0).r) * 255.0;
}
#elif defined(SRC_GREY)
vec3 fetch_src(ivec2 p) {
    return vec3(texelFetch(u_plane0, p, 0).r * 255.0);
}
#elif defined(SRC_RGB3)
vec3 fetch_src(ivec2 p) {
    int x = p.x * 3;
    return vec3(texelFetch(u_plane0, ivec2(x + u_rgb_pos.x, p.y), 0).r,
                texelFetch(u_plane0, ivec2(x + u_rgb_pos.y, p.y), 0).r,
                texelFetch(u_plane0, ivec2(x + u_rgb_pos.z, p.y), 0).r) * 255.0;
}
#elif defined(SRC_RGBA4)
vec3 fetch_src(ivec2 p) {
    vec4 t = texelFetch(u_plane0, p, 0) * 255.0;
    return vec3(dot(t, u_sel0), dot(t, u_sel1), dot(t, u_sel2));
}
#else
#error "no SRC_* macro defined"
#endif

// Source-domain sample (Y,U,V or R,G,B in 0..255) at destination pixel (x, y).
vec3 sample_src(int x, int y) {
    ivec2 d = u_transposed == 1 ? ivec2(y, x) : ivec2(x, y);
    vec4 tx = texelFetch(u_taps, ivec2(d.x, 0), 0);
    vec4 ty = texelFetch(u_taps, ivec2(d.y, 1), 0);
    ivec2 p0 = ivec2(int(tx.x), int(ty.x));
    if (tx.z == 0.0 && ty.z == 0.0) {
        return fetch_src(p0);
    }
    ivec2 p1 = ivec2(int(tx.y), int(ty.y));
    vec3 s00 = fetch_src(p0);
    vec3 s10 = fetch_src(ivec2(p1.x, p0.y));
    vec3 s01 = fetch_src(ivec2(p0.x, p1.y));
    vec3 s11 = fetch_src(p1);
    vec3 top = s00 + (s10 - s00) * tx.z;
    vec3 bot = s01 + (s11 - s01) * tx.z;
    return top + (bot - top) * ty.z;
}

// The destination pixel (x, y): output channels in 0..255, clamped, unrounded.
vec3 pixel(int x, int y) {
    if (x < u_valid.x || y < u_valid.y || x >= u_valid.z || y >= u_valid.w) {
        return u_pad.xyz;
    }
    vec3 s = sample_src(x, y);
    vec3 v = vec3(dot(u_color0.xyz, s) + u_color0.w, dot(u_color1.xyz, s) + u_color1.w,
                  dot(u_color2.xyz, s) + u_color2.w);
    return clamp(v, 0.0, 255.0);
}

uint u8_of(float v) {
    return uint(clamp(floor(v + 0.5), 0.0, 255.0));
}

void main() {
    ivec2 frag = ivec2(gl_FragCoord.xy);
    int row = frag.y - u_row0;
    int plane = 0;
    if (u_planar == 1) {
        plane = row / u_height;
        row -= plane * u_height;
    }
    int elem_size = u_dtype == 3 ? 4 : (u_dtype == 2 ? 2 : 1);
    int first = frag.x * 4 / elem_size;
    int count = 4 / elem_size;
    uint bytes = 0u;
    int cached = -1;
    vec3 px = vec3(0.0);
    float vals[4];
    for (int i = 0; i < 4; i++) {
        vals[i] = 0.0;
        if (i >= count) {
            break;
        }
        int e = first + i;
        int x = u_planar == 1 ? e : e / u_chans;
        int c = u_planar == 1 ? u_map[plane] : u_map[e - (e / u_chans) * u_chans];
        if (x >= u_width) {
            break;
        }
        if (c == 3) {
            // Alpha: opaque (255 as u8, 127 as i8, 1.0 as float).
            bytes |= (u_dtype == 1 ? 127u : 255u) << uint(8 * i);
            vals[i] = 1.0;
            continue;
        }
        if (x != cached) {
            px = pixel(x, row);
            cached = x;
        }
        float v = px[c];
        if (u_dtype <= 1) {
            // Quantised or not, one multiply-add (scale 1, bias 0 when not quantised).
            uint b = u8_of(v * u_scale[c] + u_bias[c]);
            if (u_dtype == 1) {
                b ^= 128u;
            }
            bytes |= b << uint(8 * i);
        } else {
            vals[i] = v * u_scale[c] + u_bias[c];
        }
    }
    if (u_dtype == 3) {
        bytes = floatBitsToUint(vals[0]);
    } else if (u_dtype == 2) {
        bytes = packHalf2x16(vec2(vals[0], vals[1]));
    }
    o_bytes = vec4(float(bytes & 255u), float((bytes >> 8) & 255u), float((bytes >> 16) & 255u),
                   float(bytes >> 24)) / 255.0;
}
