"""GAN datasets on tiny files written here: class folders, MNIST IDX, paired, unpaired, CelebA attributes."""

from __future__ import annotations

import gzip

import cv2
import numpy as np
import pytest
import torch

from gan.datasets import (
    HAIR_COLOURS,
    CelebADataset,
    ImageFolderGANDataset,
    MNISTDataset,
    PairedImageDataset,
    UnpairedImageDataset,
    sample_target_attrs,
)
from oars.errors import DataError, DataFileNotFoundError


def _png(path, img):
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), img)


def _solid(h, w, bgr):
    return np.full((h, w, 3), bgr, dtype=np.uint8)


def test_image_folder_classes_labels_and_rgb(tmp_path):
    for cls, bgr in (('cat', (255, 0, 0)), ('ant', (0, 0, 255))):
        for i in range(2):
            _png(tmp_path / 'train' / cls / f'{i}.png', _solid(8, 8, bgr))
    _png(tmp_path / 'train' / 'ant' / 'deep' / 'x.jpg', _solid(8, 8, (0, 0, 255)))
    pipe = [dict(type='LoadGANImageFromFile'), dict(type='PackGANInputs', keys=['img', 'label'])]
    ds = ImageFolderGANDataset(data_root=str(tmp_path), img_dir='train', pipeline=pipe)
    assert ds.metainfo['classes'] == ('ant', 'cat') and len(ds) == 5
    assert [ds.get_data_info(i)['label'] for i in range(5)] == [0, 0, 0, 1, 1]
    out = ds[4]
    img = out['inputs']['img']
    assert img.dtype == torch.uint8 and img.shape == (3, 8, 8)
    assert img[:, 0, 0].tolist() == [0, 0, 255]  # BGR blue on disk -> RGB blue
    assert out['inputs']['label'].dtype == torch.int64 and int(out['inputs']['label']) == 1
    assert out['data_samples'].img_path.endswith('cat/1.png')
    sub = ImageFolderGANDataset(data_root=str(tmp_path), img_dir='train', classes=['cat'])
    assert len(sub) == 2 and sub.get_data_info(0)['label'] == 0
    flat = ImageFolderGANDataset(data_root=str(tmp_path), img_dir='train', with_label=False)
    assert len(flat) == 5 and 'label' not in flat.get_data_info(0)
    with pytest.raises(DataFileNotFoundError, match=r"\['dog'\]"):
        ImageFolderGANDataset(data_root=str(tmp_path), img_dir='train', classes=['cat', 'dog'])


def _idx(path, magic, arr, gz):
    data = magic.to_bytes(4, 'big') + b''.join(int(s).to_bytes(4, 'big') for s in arr.shape) + arr.tobytes()
    path.write_bytes(gzip.compress(data) if gz else data)


def test_mnist_idx_plain_and_gz_and_wrong_magic(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    _idx(tmp_path / 'train-images-idx3-ubyte', 2051, imgs, gz=False)
    _idx(tmp_path / 'train-labels-idx1-ubyte.gz', 2049, labels, gz=True)
    pipe = [dict(type='GANResize', scale=32, interpolation='nearest'),
            dict(type='PackGANInputs', keys=['img', 'label'])]
    ds = MNISTDataset(data_root=str(tmp_path), pipeline=pipe)
    assert len(ds) == 5 and ds.metainfo['classes'][3] == '3'
    out = ds[2]
    assert out['inputs']['img'].shape == (1, 32, 32) and int(out['inputs']['label']) == 4
    np.testing.assert_array_equal(ds.get_data_info(2)['img'], imgs[2])
    rgb = MNISTDataset(data_root=str(tmp_path), color_type='rgb').get_data_info(1)['img']
    assert rgb.shape == (28, 28, 3) and (rgb[..., 2] == imgs[1]).all()
    # labels swapped for images: the magic number names the file
    _idx(tmp_path / 't10k-images-idx3-ubyte.gz', 2049, labels, gz=True)
    _idx(tmp_path / 't10k-labels-idx1-ubyte', 2049, labels, gz=False)
    with pytest.raises(DataError, match=r't10k-images-idx3-ubyte.gz has magic number 2049, expected 2051'):
        MNISTDataset(data_root=str(tmp_path), split='test')
    (tmp_path / 't10k-images-idx3-ubyte.gz').unlink()
    _idx(tmp_path / 't10k-images-idx3-ubyte', 2051, imgs[:3], gz=False)
    with pytest.raises(DataError, match='3 images but .* 5 labels'):
        MNISTDataset(data_root=str(tmp_path), split='test')


PAIR_PIPE = [dict(type='LoadGANImageFromFile', keys=['img_A', 'img_B']),
             dict(type='GANResize', keys=['img_A', 'img_B'], scale=16),
             dict(type='PackGANInputs', keys=['img_A', 'img_B'])]


def test_paired_folders_side_by_side_direction_and_size_errors(tmp_path):
    for i in range(3):
        _png(tmp_path / 'lab' / f'{i}.png', _solid(8, 8, (0, 0, 10 * i)))
        _png(tmp_path / 'img' / f'{i}.png', _solid(8, 8, (10 * i, 0, 200)))
        _png(tmp_path / 'ab' / f'{i}.png', np.concatenate([_solid(8, 8, (0, 0, 10 * i)),
                                                            _solid(8, 8, (10 * i, 0, 200))], axis=1))
    ds = PairedImageDataset(data_root=str(tmp_path), dir_A='lab', dir_B='img', pipeline=PAIR_PIPE)
    out = ds[1]
    assert out['inputs']['img_A'][:, 0, 0].tolist() == [10, 0, 0] and out['inputs']['img_B'][:, 0, 0].tolist() == [
        200, 0, 10]
    assert out['data_samples'].img_path.endswith('lab/1.png') and out['data_samples'].img_path_B.endswith('img/1.png')
    rev = PairedImageDataset(data_root=str(tmp_path), dir_A='lab', dir_B='img', direction='BtoA', pipeline=PAIR_PIPE)
    assert rev[1]['inputs']['img_A'][:, 0, 0].tolist() == [200, 0, 10]
    side_pipe = [dict(type='LoadPairedImageFromFile'), *PAIR_PIPE[1:]]
    for direction, first in (('AtoB', [10, 0, 0]), ('BtoA', [200, 0, 10])):
        sbs = PairedImageDataset(data_root=str(tmp_path), img_dir='ab', direction=direction, pipeline=side_pipe)
        assert sbs[1]['inputs']['img_A'][:, 0, 0].tolist() == first
        assert sbs[1]['inputs']['img_A'].shape == (3, 16, 16)
    _png(tmp_path / 'img' / '2.png', _solid(9, 8, (0, 0, 0)))  # A 8x8, B 8 wide 9 high
    with pytest.raises(DataError, match=r'lab/2.png is 8 x 8.*img/2.png is 8 x 9'):
        ds[2]
    _png(tmp_path / 'img' / 'extra.png', _solid(8, 8, (0, 0, 0)))
    with pytest.raises(DataError, match=r"only in dir_B: \['extra.png'\]"):
        PairedImageDataset(data_root=str(tmp_path), dir_A='lab', dir_B='img')
    _png(tmp_path / 'ab' / 'odd.png', _solid(8, 15, (0, 0, 0)))
    odd = PairedImageDataset(data_root=str(tmp_path), img_dir='ab', pipeline=side_pipe)
    with pytest.raises(DataError, match='odd.png: a side-by-side A|B image must have an even width'):
        odd[3]
    with pytest.raises(DataError, match='either img_dir'):
        PairedImageDataset(data_root=str(tmp_path), dir_A='lab')


def test_unpaired_length_independent_b_and_empty_folder(tmp_path):
    for i in range(5):
        _png(tmp_path / 'trainA' / f'a{i}.png', _solid(4, 4, (i, 0, 0)))
    for i in range(2):
        _png(tmp_path / 'trainB' / f'b{i}.png', _solid(4, 4, (0, i, 0)))
    ds = UnpairedImageDataset(data_root=str(tmp_path))
    assert len(ds) == 5
    assert [ds.get_data_info(i)['img_A_path'][-6:] for i in (0, 4)] == ['a0.png', 'a4.png']
    np.random.seed(0)
    draws = {ds.get_data_info(0)['img_B_path'][-6:] for _ in range(40)}
    assert draws == {'b0.png', 'b1.png'}  # B is drawn per access, not tied to the A index
    np.random.seed(0)
    again = [ds.get_data_info(3)['img_B_path'] for _ in range(10)]
    np.random.seed(0)
    assert [ds.get_data_info(3)['img_B_path'] for _ in range(10)] == again  # follows the seeded numpy RNG
    test = UnpairedImageDataset(data_root=str(tmp_path), dir_A='trainA', dir_B='trainB', test_mode=True)
    assert [test.get_data_info(i)['img_B_path'] for i in range(5)] == [
        test.get_data_info(i)['img_B_path'] for i in range(5)]
    swapped = UnpairedImageDataset(data_root=str(tmp_path), direction='BtoA')
    assert len(swapped) == 5 and swapped.get_data_info(0)['img_A_path'].endswith('b0.png')
    (tmp_path / 'testA').mkdir()
    _png(tmp_path / 'testB' / 'b.png', _solid(4, 4, (0, 0, 0)))
    with pytest.raises(DataFileNotFoundError, match=r'domain A: no images .* in folder .*testA'):
        UnpairedImageDataset(data_root=str(tmp_path), split='test')


def _celeba(root, rows, names=('5_o_Clock_Shadow', 'Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Male', 'Young')):
    (root / 'img_align_celeba').mkdir(parents=True)
    lines = [str(len(rows)), ' '.join(names)] + [f'{n}  ' + ' '.join(f'{v:2d}' for v in vals) for n, vals in rows]
    (root / 'list_attr_celeba.txt').write_text('\n'.join(lines) + '\n')


def test_celeba_attrs_partition_and_unknown_attribute(tmp_path):
    rows = [(f'{i:06d}.jpg', [1, -1, 1, -1, 1 - 2 * (i % 2), -1]) for i in range(1, 6)]
    _celeba(tmp_path, rows)
    sel = ['Blond_Hair', 'Male']
    train = CelebADataset(data_root=str(tmp_path), selected_attrs=sel, num_test=2,
                          pipeline=[dict(type='PackGANInputs', keys=['attrs'])])
    assert len(train) == 3 and train.metainfo['attr_names'] == ('Blond_Hair', 'Male')
    info = train.get_data_info(0)
    assert info['img_path'].endswith('img_align_celeba/000001.jpg')
    np.testing.assert_array_equal(info['attrs'], np.array([1.0, 0.0], dtype=np.float32))
    packed = train.prepare_data(1)
    assert packed['inputs']['attrs'].dtype == torch.float32 and packed['inputs']['attrs'].tolist() == [1.0, 1.0]
    assert packed['data_samples'].attr_names == ('Blond_Hair', 'Male')
    test = CelebADataset(data_root=str(tmp_path), selected_attrs=sel, split='test', num_test=2)
    assert [test.get_data_info(i)['img_path'][-10:] for i in range(2)] == ['000004.jpg', '000005.jpg']
    (tmp_path / 'list_eval_partition.txt').write_text(''.join(f'{n} {s}\n' for (n, _), s in zip(rows, [0, 2, 1, 0, 2])))
    assert len(CelebADataset(data_root=str(tmp_path), selected_attrs=sel, split='test')) == 2
    assert len(CelebADataset(data_root=str(tmp_path), selected_attrs=sel, split='val')) == 1
    with pytest.raises(DataError, match=r"'Blonde_Hair' is not in .*list_attr_celeba.txt; closest: Blond_Hair"):
        CelebADataset(data_root=str(tmp_path), selected_attrs=['Blonde_Hair'])
    bad = tmp_path / 'bad'
    _celeba(bad, [('000001.jpg', [1, 0, 1, 1, 1, 1])])
    with pytest.raises(DataError, match='attribute Black_Hair = 0, expected -1 or 1'):
        CelebADataset(data_root=str(bad))


def test_sample_target_attrs_permutes_rows_and_keeps_one_hair_colour():
    names = ['Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Male', 'Young']
    attrs = torch.tensor([[1, 0, 0, 1, 0], [0, 1, 1, 0, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    seen_perm = set()
    for _ in range(20):
        target = sample_target_attrs(attrs, names, gen)
        hair = [names.index(h) for h in HAIR_COLOURS if h in names]
        assert (target[:, hair].sum(1) <= 1).all()
        # every target row is a source row with at most its hair colours reduced to one of them
        rows = [next(j for j in range(4) if (attrs[j, 3:] == t[3:]).all() and (t[hair] <= attrs[j, hair]).all()
                     and (t[hair].sum() == min(1, attrs[j, hair].sum()))) for t in target]
        seen_perm.add(tuple(rows))
        assert target.dtype == attrs.dtype
    assert len(seen_perm) > 1  # the permutation is random
    gen_a, gen_b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(sample_target_attrs(attrs, names, gen_a), sample_target_attrs(attrs, names, gen_b))
    with pytest.raises(ValueError, match='K=5'):
        sample_target_attrs(attrs[:, :3], names)
