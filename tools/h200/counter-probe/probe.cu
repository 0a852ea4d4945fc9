#include <cstdio>
#include <cuda_fp16.h>
#define N 1024
__global__ void k_dp4a(int *out, int a, int b){ int acc=threadIdx.x; int x=a+threadIdx.x, y=b^threadIdx.x;
#pragma unroll 16
 for(int i=0;i<N;i++){ acc=__dp4a(x,y,acc); x+=acc; }
 out[blockIdx.x*blockDim.x+threadIdx.x]=acc; }
__global__ void k_ffma(float *out, float a, float b){ float acc=threadIdx.x, x=a;
#pragma unroll 16
 for(int i=0;i<N;i++){ acc=fmaf(x,b,acc); x=acc; }
 out[blockIdx.x*blockDim.x+threadIdx.x]=acc; }
__global__ void k_imma(int *out, int a){ int c0=0,c1=0,c2=0,c3=0; unsigned a0=a+threadIdx.x,a1=a0*3,a2=a0*5,a3=a0*7,b0=a0^1,b1=a0^2;
#pragma unroll 16
 for(int i=0;i<N;i++){ asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
   : "+r"(c0),"+r"(c1),"+r"(c2),"+r"(c3) : "r"(a0),"r"(a1),"r"(a2),"r"(a3),"r"(b0),"r"(b1)); }
 int t=blockIdx.x*blockDim.x+threadIdx.x; out[t]=c0+c1+c2+c3; }
__global__ void k_hmma(float *out, unsigned a){ float c0=0,c1=0,c2=0,c3=0; unsigned a0=a+threadIdx.x,a1=a0*3,a2=a0*5,a3=a0*7,b0=a0^1,b1=a0^2;
#pragma unroll 16
 for(int i=0;i<N;i++){ asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
   : "+f"(c0),"+f"(c1),"+f"(c2),"+f"(c3) : "r"(a0),"r"(a1),"r"(a2),"r"(a3),"r"(b0),"r"(b1)); }
 int t=blockIdx.x*blockDim.x+threadIdx.x; out[t]=c0+c1+c2+c3; }
int main(){ int *d; cudaMalloc(&d, 132*128*4);
 k_dp4a<<<132,128>>>(d,0x01020304,0x05060708);
 k_ffma<<<132,128>>>((float*)d,1.0001f,0.999f);
 k_imma<<<132,128>>>(d,0x01010101);
 k_hmma<<<132,128>>>((float*)d,0x3c003c00u);
 cudaError_t e=cudaDeviceSynchronize(); printf("done %s\n", cudaGetErrorString(e));
 printf("expect: dp4a/ffma thread insts=%d ; imma/hmma warp insts=%d\n",132*128*N,132*4*N); return 0; }
